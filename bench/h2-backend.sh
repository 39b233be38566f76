#!/bin/bash
# Passes over an HTTP/2 backend: Lacquer binaries (say, before and after
# a change) with `-p workers=W` (2 by default), each passing every
# request (keep-alive, 50 connections, a 1 KiB body) to nginx on CPU 1
# speaking h2c by prior knowledge, loaded in turn by wrk, round after
# round, so that a noisy machine disturbs them alike. Servers and load
# share the machine's cores. Prints one line per binary and round: CPU
# microseconds (user + system) per request, requests, and then how many
# connections each binary opened to the origin (`MAIN.backend_conn`).
#
# Usage: bench/h2-backend.sh SECONDS ROUNDS BINARY...
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=$1; ROUNDS=$2; shift 2
. bench/common.sh
ensure wrk nginx -- wrk nginx
# The origin speaks HTTP/2 by prior knowledge only (nginx's `http2` on a
# cleartext listener), so it is known to be up once Lacquer answers.
ORIGIN_LISTEN=http2 start_nginx_origin ''
cat > "$WORK/h2c.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$ORIGIN_PORT"; .h2c = 1; }
sub vcl_recv { return (pass); }
VCL
PORTS=(); SERVERS=(); i=0
for bin in "$@"; do
    port=$(free_port)
    "$bin" serve -j none -a "127.0.0.1:$port" -f "$WORK/h2c.vcl" -n "$WORK/lacquer$i" \
        -s malloc,256m -p "workers=${W:-2}" >"$WORK/lacquer$i.out" 2>&1 & pid=$!
    PIDS+=("$pid"); SERVERS+=("$pid"); PORTS+=("$port"); i=$((i + 1))
done
for port in "${PORTS[@]}"; do wait_up "$port"; done
for round in $(seq 1 "$ROUNDS"); do
    for j in "${!PORTS[@]}"; do
        url="http://127.0.0.1:${PORTS[$j]}/1k"
        wrk -t2 -c50 -d1s "$url" >/dev/null
        t0=$(ticks "${SERVERS[$j]}")
        out=$(wrk -t2 -c50 -d"${SECS}s" "$url")
        t1=$(ticks "${SERVERS[$j]}")
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        awk -v n="${*:$((j + 1)):1}" -v t=$((t1 - t0)) -v hz="$HZ" -v r="$reqs" \
            'BEGIN { printf "%-40s %8.2f us/req %10d requests\n", n, t / hz * 1e6 / r, r }'
    done
done
for j in "${!PORTS[@]}"; do
    conns=$("${*:$((j + 1)):1}" stat -n "$WORK/lacquer$j" -1 2>/dev/null |
        awk '$1 == "MAIN.backend_conn" { print $2 }')
    echo "${*:$((j + 1)):1}: ${conns:-?} backend connections"
done
