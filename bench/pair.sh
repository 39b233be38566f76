#!/bin/bash
# CPU time per request of two Lacquer builds (say, before and after a
# change), both pinned to CPU 0 and loaded at the same time by their own
# wrk on CPU 1, so that the machine's noise falls on both alike. The
# comparison runs twice, the builds swapped between the two places (the
# place alone can tilt a run by a percent or two), and prints the
# geometric mean of NEW/OLD over both.
#
# Usage: bench/pair.sh a|b|e SECONDS ROUNDS OLD NEW
#   a: 1 KiB cached object, 50 keep-alive connections
#   b: the same, one request per connection (Connection: close)
#   e: case a through bench/typical.vcl (about 50 lines of common VCL)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=$1; SECS=$2; ROUNDS=$3; OLD=$4; NEW=$5
. bench/common.sh
ensure wrk nginx taskset perf -- wrk nginx util-linux linux-perf
start_origin
A_HEADERS=(); E_HEADERS=()
if [ "$MODE" = b ]; then A_HEADERS=(-H "Connection: close"); E_HEADERS=(-H "Connection: close"); fi

# The backend, or for case e the typical VCL naming it.
TARGET=(-b "127.0.0.1:$ORIGIN_PORT")
if [ "$MODE" = e ]; then
    sed "s/ORIGIN_PORT/$ORIGIN_PORT/" bench/typical.vcl > "$WORK/typical.vcl"
    TARGET=(-f "$WORK/typical.vcl")
fi
# serve NAME BINARY: a Lacquer on CPU 0; PORT and PID are its.
serve() {
    PORT=$(free_port)
    taskset -c 0 "$2" serve -j none -a "127.0.0.1:$PORT" "${TARGET[@]}" \
        -n "$WORK/$1" -s malloc,256m -p workers=1 >"$WORK/$1.out" 2>&1 & PID=$!
    PIDS+=("$PID")
    wait_up "$PORT"
}

serve old "$OLD"; OLD_PID=$PID; OLD_PORT=$PORT
serve new "$NEW"; NEW_PID=$PID; NEW_PORT=$PORT
echo "new in the second place:"
compare_pair "$SECS" "$ROUNDS" "$OLD_PID" "$OLD_PORT" "$NEW_PID" "$NEW_PORT" old new
forward=$PAIR_RATIO
echo "new in the first place:"
compare_pair "$SECS" "$ROUNDS" "$NEW_PID" "$NEW_PORT" "$OLD_PID" "$OLD_PORT" new old
backward=$PAIR_RATIO
awk -v f="$forward" -v b="$backward" \
    'BEGIN { printf "(%s) new/old CPU per request: %.3f (%.3f, and 1/%.3f swapped)\n", "'"$MODE"'", sqrt(f / b), f, b }'
