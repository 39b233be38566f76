#!/usr/bin/env bash
# A crawler against a hot set, side by side in one run: an nginx origin
# answers every URL with 8 KiB (Cache-Control: max-age=3600); Lacquer and
# varnishd each get a store of `-s malloc,SIZE` that holds the hot set
# several times over but not the crawl. bench/scan.py warms 500 hot URLs,
# then walks 6000 crawl URLs once each, asking one hot URL after every
# four, and prints the hot set's hit ratio before and during the crawl:
# how well each cache's eviction keeps what is requested again.
#
# Usage: bench/scan.sh [size]   (default 16m)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE="${1:-16m}"

. bench/common.sh
ensure varnishd nginx -- varnish nginx
build_lacquer

mkdir -p "$WORK/www"
head -c 8192 /dev/zero | tr '\0' 's' > "$WORK/www/body"
start_nginx_origin 'location / {
            default_type text/plain;
            add_header Cache-Control "max-age=3600";
            try_files /body =404;
        }'

LQ_PORT=$(free_port); VA_PORT=$(free_port)
"$LACQUER" serve -j none -a "127.0.0.1:$LQ_PORT" -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/lacquer" \
    -s "malloc,$SIZE" >"$WORK/lacquer.out" 2>&1 & PIDS+=($!)
varnishd -F -j none -a "127.0.0.1:$VA_PORT" -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/varnish" \
    -s "malloc,$SIZE" >"$WORK/varnish.out" 2>&1 & PIDS+=($!)
for p in "$LQ_PORT" "$VA_PORT"; do wait_up "$p"; done

printf 'lacquer  '; python3 bench/scan.py "$LQ_PORT" 500 6000 4
printf 'varnish  '; python3 bench/scan.py "$VA_PORT" 500 6000 4
