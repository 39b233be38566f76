#!/usr/bin/env bash
# Hits from each kind of store, side by side in one run: Lacquer with
# `-s malloc`, `-s file` and `-s persistent`, varnishd with `-s malloc`
# and `-s file`, and nginx's proxy_cache on disk, each alone on CPU 0 in
# turn, in front of one nginx origin on CPU 1 that answers /o/N with
# 16 KiB. Each cache is filled with N distinct objects, then h2load (CPU
# 1, HTTP/1.1, 32 connections) asks for them in turn. Prints requests a
# second and CPU time per request for each, then the ratios against
# nginx's proxy_cache and varnishd's file store. The objects fit in the
# page cache: this is the cost of a hit, not of the disk.
#
# Usage: bench/storage.sh [objects] [requests]   (defaults 2000, 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2000}"
REQS="${2:-200000}"

. bench/common.sh
ensure varnishd h2load nginx taskset curl -- varnish nghttp2-client nginx util-linux curl
build_lacquer

head -c 16384 /dev/zero | tr '\0' 'x' > "$WORK/o16k" && mkdir -p "$WORK/www" && mv "$WORK/o16k" "$WORK/www/"
start_nginx_origin 'location /o/ {
            add_header Cache-Control "max-age=3600";
            rewrite ^ /o16k break;
        }'
wait_up "$ORIGIN_PORT"

# An nginx proxy_cache on disk, on port $1.
start_nginx_cache() {
    mkdir -p "$WORK/ngx-cache"
    cat > "$WORK/cache.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx-cache.pid;
error_log $WORK/nginx-cache.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    proxy_cache_path $WORK/ngx-cache levels=1:2 keys_zone=c:16m max_size=1g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 16; }
    server {
        listen 127.0.0.1:$1;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache c;
            proxy_cache_valid 200 1h;
        }
    }
}
CONF
    taskset -c 0 nginx -c "$WORK/cache.conf" -p "$WORK" & SERVER_PID=$!
}

# run LABEL COMMAND...: starts the server on CPU 0 (PORT is free for it),
# fills it, measures, stops it.
run() {
    local label=$1; shift
    "$@"
    PIDS+=("$SERVER_PID")
    for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$PORT/o/0" && break; sleep 0.1; done
    seq 1 "$N" | sed "s|^|http://127.0.0.1:$PORT/o/|" > "$WORK/uris"
    taskset -c 1 h2load --h1 -c 1 -m 1 -n "$N" -i "$WORK/uris" > "$WORK/fill.out" 2>&1
    local t0 t1
    t0=$(ticks "$SERVER_PID")
    taskset -c 1 h2load --h1 -c 32 -t 1 -n "$REQS" -i "$WORK/uris" > "$WORK/hits.out" 2>&1
    t1=$(ticks "$SERVER_PID")
    local rps ok
    rps=$(awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$WORK/hits.out")
    ok=$(awk '/status codes:/ { print $3 }' "$WORK/hits.out")
    awk -v l="$label" -v r="$rps" -v t="$((t1 - t0))" -v hz="$HZ" -v n="$REQS" -v ok="$ok" \
        'BEGIN { printf "%-22s %10.0f req/s %8.2f cpu-us/req  (%s of %s 2xx)\n", l, r, t * 1e6 / hz / n, ok, n }' \
        | tee -a "$WORK/results.txt"
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

lacquer() {
    PORT=$(free_port)
    taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$WORK/lq-$1" -p workers=1 -s "$2" >"$WORK/lq-$1.out" 2>&1 & SERVER_PID=$!
}
varnish() {
    PORT=$(free_port)
    taskset -c 0 varnishd -F -j none -a "127.0.0.1:$PORT" -b "127.0.0.1:$ORIGIN_PORT" \
        -n "$WORK/va-$1" -s "$2" >"$WORK/va-$1.out" 2>&1 & SERVER_PID=$!
}
nginx_cache() { PORT=$(free_port); start_nginx_cache "$PORT"; }

run "lacquer malloc" lacquer malloc malloc,1g
run "lacquer file" lacquer file "file,$WORK/lq.file,1g"
run "lacquer persistent" lacquer persistent "persistent,$WORK/lq.per,1g"
run "varnishd malloc" varnish malloc malloc,1g
run "varnishd file" varnish file "file,$WORK/va.file,1g"
run "nginx proxy_cache" nginx_cache

awk '{ name = $1 " " $2; rps[name] = $3; cpu[name] = $5 }
     END {
        split("lacquer malloc|lacquer file|lacquer persistent", lq, "|")
        for (i = 1; i <= 3; i++) {
            printf "%-20s cpu/req vs nginx proxy_cache %.2fx, vs varnishd file %.2fx, vs varnishd malloc %.2fx\n",
                lq[i], cpu[lq[i]] / cpu["nginx proxy_cache"], cpu[lq[i]] / cpu["varnishd file"], cpu[lq[i]] / cpu["varnishd malloc"]
        }
     }' "$WORK/results.txt"
