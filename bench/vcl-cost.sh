#!/usr/bin/env bash
# What the typical VCL costs, measured side by side: two Lacquer instances
# on CPU 0 at once, one with the built-in VCL (-b, case a) and one with
# bench/typical.vcl (case e), each driven by its own wrk on CPU 1 for the
# same seconds. Both see the same machine noise, so the ratio of their CPU
# time per request is steadier than sequential runs give. Prints each
# round and the mean ratio (e)/(a).
#
# Usage: bench/vcl-cost.sh [seconds-per-round] [rounds]   (default 5 6)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-5}"
ROUNDS="${2:-6}"

. bench/common.sh
ensure wrk nginx taskset perf -- wrk nginx util-linux linux-perf
build_lacquer

A_PORT=$(free_port); E_PORT=$(free_port)
start_origin
sed "s/ORIGIN_PORT/$ORIGIN_PORT/" bench/typical.vcl > "$WORK/typical.vcl"
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$A_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/a" -s malloc,256m -p workers=1 >"$WORK/a.out" 2>&1 & A_PID=$!; PIDS+=($A_PID)
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$E_PORT" -f "$WORK/typical.vcl" \
    -n "$WORK/e" -s malloc,256m -p workers=1 >"$WORK/e.out" 2>&1 & E_PID=$!; PIDS+=($E_PID)
wait_up "$A_PORT"; wait_up "$E_PORT"

# Both instances get the same request bytes, so the ratio is the VCL's
# cost and not the cost of parsing longer requests. The built-in VCL would
# pass a request that carries a Cookie, so case (a) carries a header of the
# same length under another name.
COOKIE="_ga=GA1.2.3; __utmz=1.2.3; _gid=GA1.9"
A_HEADERS=(-H "X-Cooky: $COOKIE" -H "Accept-Encoding: br, gzip, deflate")
E_HEADERS=(-H "Cookie: $COOKIE" -H "Accept-Encoding: br, gzip, deflate")
compare_pair "$DURATION" "$ROUNDS" "$A_PID" "$A_PORT" "$E_PID" "$E_PORT" a e
echo "mean (e)/(a): ${PAIR_RATIO}x CPU per request with the typical VCL"
