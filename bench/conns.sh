#!/usr/bin/env bash
# Connections without requests, side by side in one run: bench/conns.py
# opens N connections to Lacquer and to varnishd (each pinned to CPU 0,
# defaults otherwise) and holds them, first silent, then each having sent
# the start of a request head (a slowloris). For each server and kind it
# prints how many connections the server took, its resident anonymous
# memory per connection, how long a real request for a cached object takes
# meanwhile, and how many of the held connections are still open once
# timeout_idle (5 s by default, both) has passed; then the ratio of memory
# per connection. Last, bench/dribble.py sends request heads of 8 and 32
# KiB a byte at a time to each and prints the server's CPU time per byte:
# flat when a server does not scan the whole head again on every read.
#
# Usage: bench/conns.sh [connections]   (default 5000; the open-files
# limit must allow that many on both sides)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-5000}"
ulimit -n "$((N * 2 + 1000))" 2>/dev/null || true

. bench/common.sh
ensure varnishd nginx taskset -- varnish nginx util-linux
build_lacquer
start_origin

# Each kind of connection meets freshly started servers, so that none
# reuses memory the previous kind made its allocator keep.
start_servers() {
    LQ_PORT=$(free_port); VA_PORT=$(free_port)
    rm -rf "$WORK/lacquer" "$WORK/varnish"
    taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$LQ_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$WORK/lacquer" -s malloc,256m -p workers=1 -p http_req_size=48k \
        >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
    taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$WORK/varnish" -s malloc,256m -p http_req_size=48k \
        >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)
    for p in "$LQ_PORT" "$VA_PORT"; do wait_up "$p"; done
}
# server_at NAME: PORT and PID of that server.
server_at() {
    case $1 in
        lacquer) PORT=$LQ_PORT PID=$LQ_PID ;;
        varnish) PORT=$VA_PORT PID=$VA_PID ;;
    esac
}
stop_servers() {
    kill "$LQ_PID" "$VA_PID"
    wait "$LQ_PID" "$VA_PID" 2>/dev/null || true
}

for kind in idle partial; do
    start_servers
    for server in lacquer varnish; do
        server_at "$server"
        {
            printf '%-8s ' "$server"
            taskset -c 1 python3 bench/conns.py "$PORT" "$PID" "$N" "$kind" 7
        } | tee -a "$WORK/results.txt"
    done
    stop_servers
done
awk '{ for (i = 2; i <= NF; i++) if ($i == "bytes/connection,") per[$1 " " $2] = $(i - 1) }
     END { printf "bytes per connection, Lacquer/Varnish: idle %.3fx, partial head %.3fx\n",
               per["lacquer idle"] / per["varnish idle"], per["lacquer partial"] / per["varnish partial"] }' \
    "$WORK/results.txt"
start_servers
for server in lacquer varnish; do
    server_at "$server"
    for size in 8192 32768; do
        printf '%-8s ' "$server"
        taskset -c 1 python3 bench/dribble.py "$PORT" "$PID" "$size" 10
    done
done
