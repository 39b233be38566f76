#!/usr/bin/env bash
# A large object through each store, in bounded memory: an nginx origin
# on CPU 1 serves a file of SIZE (default 1g) of random bytes; Lacquer
# (CPU 0) with `-s malloc`, `-s file` and `-s persistent` in turn fetches
# it (a miss), serves it again (a hit), and for the persistent store
# serves it once more after kill -9 and a restart. Prints, for each, the
# peak resident anonymous memory during each transfer, whether the bytes
# are the origin's (SHA-256), and whether the last was a hit. The file
# and persistent stores should hold their memory near their idle size
# whatever the object's size; malloc holds the object.
#
# Usage: bench/large.sh [size]   (default 1g)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE="${1:-1g}"

. bench/common.sh
ensure nginx taskset curl sha256sum -- nginx util-linux curl coreutils
build_lacquer

start_nginx_origin 'location /big { add_header Cache-Control "max-age=3600"; }'
head -c "$(numfmt --from=iec "${SIZE^^}")" /dev/urandom > "$WORK/www/big"
wait_up "$ORIGIN_PORT"
want=$(sha256sum < "$WORK/www/big" | cut -d' ' -f1)
PORT=$(free_port)

start() {
    taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$WORK/lq" -p workers=1 -s "$1" >"$WORK/lq.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
    for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$PORT/1k" && break; sleep 0.1; done
}
anon() { awk '/RssAnon/ { print $2 }' "/proc/$LQ_PID/status"; }

# transfer LABEL: fetches /big, sampling the daemon's anonymous memory.
transfer() {
    local peak=0 now got hit
    curl -fsD "$WORK/headers" -o "$WORK/out" "http://127.0.0.1:$PORT/big" & local c=$!
    while kill -0 "$c" 2>/dev/null; do
        now=$(anon); [ "$now" -gt "$peak" ] && peak=$now
        sleep 0.05
    done
    wait "$c"
    got=$(sha256sum < "$WORK/out" | cut -d' ' -f1)
    hit=$(awk -F': ' 'tolower($1) == "x-varnish" { print ($2 ~ / /) ? "hit" : "miss" }' "$WORK/headers" | tr -d '\r')
    printf '%-12s %-22s peak anon RSS %8d KiB  %s  %s\n' "$STORE" "$1" "$peak" \
        "$([ "$got" = "$want" ] && echo "bytes match" || echo "BYTES DIFFER")" "$hit"
    rm -f "$WORK/out"
}

for STORE in malloc file persistent; do
    case $STORE in
        malloc) spec="malloc,3g" ;;
        file) spec="file,$WORK/store.file,3g" ;;
        persistent) spec="persistent,$WORK/store.per,3g" ;;
    esac
    start "$spec"
    printf '%-12s %-22s idle anon RSS %8d KiB\n' "$STORE" "" "$(anon)"
    transfer "miss"
    transfer "hit"
    if [ "$STORE" = persistent ]; then
        kill -9 "$LQ_PID"; wait "$LQ_PID" 2>/dev/null || true
        start "$spec"
        transfer "after kill -9"
    fi
    kill "$LQ_PID"; wait "$LQ_PID" 2>/dev/null || true
    rm -f "$WORK/store.file" "$WORK/store.per"
done
