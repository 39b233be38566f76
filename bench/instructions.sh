#!/bin/bash
# Instructions a request costs in user space, counted by callgrind: exact
# and repeatable where the CPU-time benches (`pair.sh`) cannot tell
# apart changes of a percent. A Lacquer build serves the 1 KiB cached
# object of case (a) under valgrind with one worker; after a warm-up,
# counting is turned on for REQUESTS requests from h2load (50
# connections), then the count is divided by them. Prints the total a
# request and, with TOP, the functions that cost most (their own
# instructions, inlined code included).
#
# Usage: bench/instructions.sh [BINARY] [REQUESTS] [a|b|a-tls|b-tls] [TOP]
#   a: keep-alive connections (the default)
#   b: one request per connection (Connection: close)
#   a-tls, b-tls: the same over TLS (-A, an ECDSA P-256 certificate;
#   b-tls is a full handshake a request)
# The counts of two runs of one build differ by about 2% (how many
# events each wake of the event loop finds); compare builds on the same
# case, and on more than one run when the difference is that small.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
ensure valgrind callgrind_control h2load openssl -- valgrind nghttp2-client openssl
if [ -n "${1:-}" ]; then
    BIN=$1
else
    build_lacquer
    BIN=$LACQUER
fi
REQUESTS=${2:-20000}
MODE=${3:-a}
TOP=${4:-0}
start_origin
port=$(free_port)
out="$WORK/callgrind"
tls=()
url="http://127.0.0.1:$port/1k"
if [ "${MODE%-tls}" != "$MODE" ]; then
    tls_port=$(free_port)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
    cat "$WORK/key.pem" "$WORK/cert.pem" >"$WORK/combined.pem"
    printf 'frontend = "[127.0.0.1]:%s"\npem-file = "%s"\n' "$tls_port" "$WORK/combined.pem" >"$WORK/tls.conf"
    tls=(-A "$WORK/tls.conf")
    url="https://127.0.0.1:$tls_port/1k"
fi
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.%p" \
    "$BIN" serve -j none -a "127.0.0.1:$port" "${tls[@]}" -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/lacquer" \
    -s malloc,256m -p workers=1 >"$WORK/lacquer.out" 2>&1 & pid=$!
PIDS+=("$pid")
wait_up "$port"
extra=()
[ "${MODE%-tls}" = b ] && extra=(-H "Connection: close")
h2load --h1 -n 2000 -c 50 "${extra[@]}" "$url" >/dev/null
callgrind_control -i on "$pid" >/dev/null 2>&1
done=$(h2load --h1 -n "$REQUESTS" -c 50 "${extra[@]}" "$url" | awk '/^requests:/ {print $8}')
callgrind_control -d "$pid" >/dev/null 2>&1
callgrind_control -i off "$pid" >/dev/null 2>&1
[ "$done" = "$REQUESTS" ] || { echo "only $done of $REQUESTS requests succeeded" >&2; exit 1; }
dump="$out.$pid.1"
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "($MODE) $(basename "$BIN"): $((total / REQUESTS)) instructions a request"
if [ "$TOP" -gt 0 ]; then
    callgrind_annotate --threshold=100 "$dump" 2>/dev/null |
        grep -vE '\([0-9,]+x\)' |
        sed -nE 's/^ *([0-9,]+) \([^)]*\) +[^:]*:(.*)$/\1\t\2/p' |
        sed -E 's/ \[[^]]*\]$//' |
        awk -F'\t' -v n="$REQUESTS" '{gsub(",", "", $1); a[$2] += $1}
            END {for (k in a) printf "%7.0f  %s\n", a[k] / n, k}' |
        sort -rn | head -n "$TOP"
fi
