#!/usr/bin/env bash
# What the shared-memory log costs, measured side by side: two Lacquer
# instances with the built-in VCL (case a of bench/run.sh) on CPU 0 at
# once, one with the log off (-p vsl_enabled=off) and one logging every
# request while `lacquer log -g request` reads it (on CPU 1, output
# discarded), each driven by its own wrk on CPU 1 for the same seconds.
# Prints each round and the mean ratio of CPU time per request,
# logged/unlogged.
#
# Usage: bench/log-cost.sh [seconds-per-round] [rounds]   (default 5 6)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-5}"
ROUNDS="${2:-6}"

. bench/common.sh
ensure wrk nginx taskset perf -- wrk nginx util-linux linux-perf
build_lacquer

OFF_PORT=$(free_port); ON_PORT=$(free_port)
start_origin
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$OFF_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/off" -s malloc,256m -p workers=1 -p vsl_enabled=off >"$WORK/off.out" 2>&1 & OFF_PID=$!; PIDS+=($OFF_PID)
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$ON_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/on" -s malloc,256m -p workers=1 >"$WORK/on.out" 2>&1 & ON_PID=$!; PIDS+=($ON_PID)
wait_up "$OFF_PORT"; wait_up "$ON_PORT"
taskset -c 1 "$LACQUER" log -n "$WORK/on" -g request > /dev/null & PIDS+=($!)

A_HEADERS=(); E_HEADERS=()
compare_pair "$DURATION" "$ROUNDS" "$OFF_PID" "$OFF_PORT" "$ON_PID" "$ON_PORT" off log
echo "mean log/off: ${PAIR_RATIO}x CPU per request with every request logged and read"
