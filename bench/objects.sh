#!/usr/bin/env bash
# Memory per cached object, side by side in one run: an nginx origin
# answers /o/N with 100 bytes and its usual headers (Server, Date,
# Content-Type, Content-Length, Connection, Cache-Control: max-age=3600);
# Lacquer and varnishd (each `-s malloc,2g`, pinned to CPU 0) are filled
# with N distinct URLs by h2load over HTTP/1.1 on CPU 1. Prints, for each,
# the objects it holds (MAIN.n_object), its resident anonymous memory
# before and after the fill, and the growth divided by the objects: the bytes one
# small object costs, all overhead included (index, key, object, headers,
# body, eviction lists, allocator waste), then the ratio; and on standard
# error what each charged its store per object (SMA.s0.g_bytes / n_object).
#
# Usage: bench/objects.sh [objects]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-200000}"

. bench/common.sh
ensure varnishd varnishstat h2load nginx taskset -- varnish nghttp2-client nginx util-linux
build_lacquer

BODY=$(head -c 100 /dev/zero | tr '\0' 'o')
start_nginx_origin "location / {
            default_type text/plain;
            add_header Cache-Control \"max-age=3600\";
            return 200 \"$BODY\";
        }"

LQ_PORT=$(free_port); VA_PORT=$(free_port)
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$LQ_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/lacquer" -s malloc,2g -p workers=1 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/varnish" -s malloc,2g >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)
for p in "$LQ_PORT" "$VA_PORT"; do wait_up "$p"; done

# The resident anonymous memory (KiB) of a process and its children:
# the heap, where both keep objects, without the shared-memory log and
# counters (file mappings, touched as the log is written).
rss() {
    local total=0 pid
    for pid in $1 $(pgrep -P "$1" || true); do
        total=$((total + $(awk '/RssAnon/ {print $2}' "/proc/$pid/status")))
    done
    echo "$total"
}
objects_lacquer() { "$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "MAIN.n_object" { print $2 }'; }
objects_varnish() { varnishstat -n "$WORK/varnish" -1 -f MAIN.n_object | awk '{ print $2 }'; }
sma_lacquer() { "$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "SMA.s0.g_bytes" { print $2 }'; }
sma_varnish() { varnishstat -n "$WORK/varnish" -1 -f SMA.s0.g_bytes | awk '{ print $2 }'; }

# fill NAME PORT PID
fill() {
    local name=$1 port=$2 pid=$3 before after objects
    seq 1 "$N" | sed "s|^|http://127.0.0.1:$port/o/|" > "$WORK/uris-$name"
    # Warm: the first objects and the allocator's first arenas.
    for i in 1 2 3 4 5; do curl -fso /dev/null "http://127.0.0.1:$port/warm/$i"; done
    before=$(rss "$pid")
    # One client: h2load starts each client at the top of the list.
    taskset -c 1 h2load --h1 -c 1 -m 4 -n "$N" -i "$WORK/uris-$name" >"$WORK/h2load-$name" 2>&1
    sleep 1
    after=$(rss "$pid")
    objects=$("objects_$name")
    sma=$("sma_$name")
    awk -v n="$name" -v b="$before" -v a="$after" -v o="$objects" \
        'BEGIN { printf "%-8s %9d objects  anon RSS %8d -> %8d KiB  %6.0f bytes/object\n", n, o, b, a, (a - b) * 1024 / (o - 5) }' \
        | tee -a "$WORK/results.txt"
    # What the store says it holds, per object (the budget -s bounds).
    awk -v n="$name" -v s="$sma" -v o="$objects" \
        'BEGIN { printf "%-8s SMA.s0.g_bytes %d, %.0f bytes/object charged\n", n, s, s / o }' >&2
}

fill lacquer "$LQ_PORT" "$LQ_PID"
fill varnish "$VA_PORT" "$VA_PID"
awk '{ per[$1] = $(NF - 1) } END { printf "bytes per object: Lacquer/Varnish %.3fx (goal <= 0.35x)\n", per["lacquer"] / per["varnish"] }' \
    "$WORK/results.txt"
