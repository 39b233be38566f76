#!/usr/bin/env bash
# A persistent store after kill -9: Lacquer (`-s p=persistent`, pinned to
# CPU 0) is filled with N small objects (100-byte bodies with an nginx
# origin's headers) by h2load on CPU 1, killed with SIGKILL, and started
# again on the same file. Prints:
# - write amplification: bytes written to the file per byte stored
#   (records and frame headers included), from the store's counters, and
#   what the kernel was asked to write for the process (/proc/PID/io);
# - recovery: objects recovered and how fast, as the daemon reports it,
#   and the time from start to the first hit served;
# - memory: resident anonymous memory per recovered object;
# - a cold restart: killed again, the page cache dropped (when this runs
#   as root), started again: recovery and first hit read from the disk.
#
# Usage: bench/recovery.sh [objects] [store size]   (defaults 1000000, 2g)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000000}"
SIZE="${2:-2g}"

. bench/common.sh
ensure h2load nginx taskset curl -- nghttp2-client nginx util-linux curl
build_lacquer

BODY=$(head -c 100 /dev/zero | tr '\0' 'o')
start_nginx_origin "location / {
            default_type text/plain;
            add_header Cache-Control \"max-age=36000\";
            return 200 \"$BODY\";
        }"
wait_up "$ORIGIN_PORT"

PORT=$(free_port)
# The work directory (the shared-memory log) in memory, so that the
# kernel's count of bytes written is the store's alone.
RUNDIR=$(mktemp -d -p /dev/shm)
remove_rundir() { rm -rf "$RUNDIR"; }
trap 'cleanup; remove_rundir' EXIT
start() {
    taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$RUNDIR" -p workers=1 -s "p=persistent,$WORK/store.bin,$SIZE" \
        >"$WORK/lacquer.out" 2>"$WORK/lacquer.err" & LQ_PID=$!; PIDS+=($LQ_PID)
}
counter() { "$LACQUER" stat -n "$RUNDIR" -1 -f "$1" | awk '{ print $2 }'; }

start
for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$PORT/warm" && break; sleep 0.1; done
seq 1 "$N" | sed "s|^|http://127.0.0.1:$PORT/o/|" > "$WORK/uris"
io_before=$(awk '/^write_bytes/ { print $2 }' "/proc/$LQ_PID/io")
started=$(date +%s.%N)
# One client: h2load starts each client at the top of the list.
taskset -c 1 h2load --h1 -c 1 -m 8 -n "$N" -i "$WORK/uris" > "$WORK/fill.out" 2>&1
filled=$(date +%s.%N)
sleep 6 # one sync of the store
io_after=$(awk '/^write_bytes/ { print $2 }' "/proc/$LQ_PID/io")
objects=$(counter SMP.p.c_objects_written)
written=$(counter SMP.p.c_written)
content=$(counter SMP.p.c_content_written)
awk -v n="$objects" -v w="$written" -v stored="$content" -v io=$((io_after - io_before)) -v t0="$started" -v t1="$filled" 'BEGIN {
    # stored: the heads (as text) and bodies of the objects written
    printf "filled %d objects in %.1f s (%.0f/s)\n", n, t1 - t0, n / (t1 - t0)
    printf "write amplification: %.2fx (file bytes written / head+body bytes stored), kernel writes %.2fx\n", w / stored, io / stored
}'

kill -9 "$LQ_PID"; wait "$LQ_PID" 2>/dev/null || true
t0=$(date +%s.%N)
start
until curl -fso /dev/null "http://127.0.0.1:$PORT/o/$N"; do sleep 0.005; done
t1=$(date +%s.%N)
hit=$(curl -fsD - -o /dev/null "http://127.0.0.1:$PORT/o/1" | awk -F': ' 'tolower($1) == "x-varnish" { print $2 }' | tr -d '\r')
grep '^Storage' "$WORK/lacquer.err" || true
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "first hit served %.2f s after start\n", b - a }'
echo "X-Varnish of /o/1 after the restart: $hit (two numbers: a hit)"
recovered=$(counter SMP.p.c_recovered)
rss=$(awk '/RssAnon/ { print $2 }' "/proc/$LQ_PID/status")
awk -v r="$recovered" -v k="$rss" 'BEGIN { printf "memory: %d KiB anonymous for %d recovered objects, %.0f bytes each\n", k, r, k * 1024 / r }'

# Cold: nothing of the file in the page cache.
kill -9 "$LQ_PID"; wait "$LQ_PID" 2>/dev/null || true
if sync && (echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; then
    t0=$(date +%s.%N)
    start
    until curl -fso /dev/null "http://127.0.0.1:$PORT/o/$N"; do sleep 0.005; done
    t1=$(date +%s.%N)
    grep '^Storage' "$WORK/lacquer.err" | sed 's/^/cold: /' || true
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "cold: first hit served %.2f s after start\n", b - a }'
else
    echo "cold: skipped (dropping the page cache needs root)"
fi
