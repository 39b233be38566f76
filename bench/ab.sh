#!/bin/bash
# A/B of CPU per request: Lacquer binaries (say, before and after a
# change) and the nginx `return 200` ceiling, each pinned to CPU 0 and
# loaded in turn by wrk on CPU 1, round after round, so that a noisy
# machine disturbs them alike. Prints one line per server and round:
# case, server, CPU microseconds (user + system) per request, requests.
#
# Usage: bench/ab.sh a|b SECONDS ROUNDS BINARY... [nginx] [nginx-deferred]
#   nginx-deferred: the ceiling with its accepts deferred until data
#   comes (`listen ... deferred`), as Lacquer's accept_filter defers them
#   a: 1 KiB cached object, 50 keep-alive connections
#   b: the same, one request per connection (Connection: close)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=$1; SECS=$2; ROUNDS=$3; shift 3
. bench/common.sh
ensure wrk nginx taskset -- wrk nginx util-linux
start_origin
PORTS=(); SERVERS=(); NAMES=(); i=0
for bin in "$@"; do
    port=$(free_port)
    if [ "$bin" = nginx ] || [ "$bin" = nginx-deferred ]; then
        defer=${bin#nginx}
        start_ceiling "$port" "${defer#-}"
        pid=$CEIL_PID
    else
        taskset -c 0 "$bin" serve -j none -a "127.0.0.1:$port" -b "127.0.0.1:$ORIGIN_PORT" \
            -n "$WORK/lacquer$i" -s malloc,256m -p workers=1 >"$WORK/lacquer$i.out" 2>&1 & pid=$!
    fi
    [ "${bin#nginx}" != "$bin" ] || PIDS+=("$pid")
    SERVERS+=("$pid"); PORTS+=("$port"); NAMES+=("$bin"); i=$((i + 1))
done
for port in "${PORTS[@]}"; do wait_up "$port"; done
extra=()
[ "$MODE" = b ] && extra=(-H "Connection: close")
for round in $(seq 1 "$ROUNDS"); do
    for j in "${!PORTS[@]}"; do
        url="http://127.0.0.1:${PORTS[$j]}/1k"
        taskset -c 1 wrk -t1 -c50 -d1s "${extra[@]}" "$url" >/dev/null
        t0=$(ticks "${SERVERS[$j]}")
        out=$(taskset -c 1 wrk -t1 -c50 -d"${SECS}s" "${extra[@]}" "$url")
        t1=$(ticks "${SERVERS[$j]}")
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        awk -v m="$MODE" -v n="${NAMES[$j]}" -v t=$((t1 - t0)) -v hz="$HZ" -v r="$reqs" \
            'BEGIN { printf "(%s) %-40s %8.2f us/req %10d requests\n", m, n, t / hz * 1e6 / r, r }'
    done
done
