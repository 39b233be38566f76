#!/usr/bin/env bash
# TLS side by side, in one run: 1 KiB cache hits over HTTPS (an ECDSA
# P-256 certificate) from
#   - nginx answering `return 200` over TLS (the ceiling),
#   - Lacquer terminating TLS itself (-A, Hitch's configuration syntax),
#   - Hitch in front of varnishd (PROXY v2 between them), both on the
#     server's CPU,
#   - nginx proxy_cache over TLS,
# each server pinned to CPU 0, wrk and the origin on CPU 1. Two cases:
# keep-alive connections, and a new TLS connection (full handshake, no
# resumption: wrk does not resume) per request. Prints requests/s and
# server CPU time per request, the ratios to the ceiling and to Hitch +
# Varnish, and the memory Lacquer holds per idle TLS connection.
#
# Usage: bench/tls.sh [seconds-per-run]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CONNS=50

. bench/common.sh
ensure varnishd hitch wrk nginx taskset openssl -- varnish hitch wrk nginx util-linux openssl
build_lacquer

start_origin
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat "$WORK/key.pem" "$WORK/cert.pem" > "$WORK/combined.pem"
chmod -R a+rX "$WORK"
ONE_K=$(head -c 1024 /dev/zero | tr '\0' 'a')

CEIL_PORT=$(free_port); LQ_PORT=$(free_port); HITCH_PORT=$(free_port)
VA_PORT=$(free_port); NGC_PORT=$(free_port)

# The ceiling: nginx over TLS, answering from memory.
cat > "$WORK/ceiling-tls.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx-ceiling-tls.pid;
error_log $WORK/nginx-ceiling-tls.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    ssl_session_cache off;
    ssl_session_tickets off;
    server {
        listen 127.0.0.1:$CEIL_PORT ssl;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / { default_type text/plain; return 200 "$ONE_K"; }
    }
}
CONF
taskset -c 0 nginx -c "$WORK/ceiling-tls.conf" -p "$WORK" & CEIL_PID=$!; PIDS+=($CEIL_PID)

# nginx proxy_cache over TLS.
mkdir -p "$WORK/nginx-cache"
cat > "$WORK/cache-tls.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx-cache-tls.pid;
error_log $WORK/nginx-cache-tls.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    ssl_session_cache off;
    ssl_session_tickets off;
    proxy_cache_path $WORK/nginx-cache keys_zone=one:10m;
    server {
        listen 127.0.0.1:$NGC_PORT ssl;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / { proxy_pass http://127.0.0.1:$ORIGIN_PORT; proxy_cache one; }
    }
}
CONF
taskset -c 0 nginx -c "$WORK/cache-tls.conf" -p "$WORK" & NGC_PID=$!; PIDS+=($NGC_PID)

# Lacquer with the Hitch-style file.
cat > "$WORK/lacquer-tls.conf" <<CONF
frontend = "[127.0.0.1]:$LQ_PORT"
pem-file = "$WORK/combined.pem"
session-cache = 0
CONF
taskset -c 0 "$LACQUER" serve -j none -a 127.0.0.1:0 -A "$WORK/lacquer-tls.conf" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/lacquer" -s malloc,256m -p workers=1 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)

# Hitch + varnishd, PROXY v2 between them, both on CPU 0.
taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT,PROXY" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/varnish" -s malloc,256m >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)
cat > "$WORK/hitch.conf" <<CONF
frontend = "[127.0.0.1]:$HITCH_PORT"
backend = "[127.0.0.1]:$VA_PORT"
pem-file = "$WORK/combined.pem"
write-proxy-v2 = on
workers = 1
daemon = off
user = "nobody"
CONF
taskset -c 0 hitch --config="$WORK/hitch.conf" >"$WORK/hitch.out" 2>&1 & HITCH_PID=$!; PIDS+=($HITCH_PID)

wait_tls() { for _ in $(seq 1 100); do curl -kfso /dev/null "https://127.0.0.1:$1/1k" && return 0; sleep 0.1; done; echo "port $1 did not come up" >&2; exit 1; }
for p in "$CEIL_PORT" "$NGC_PORT" "$LQ_PORT" "$HITCH_PORT"; do wait_tls "$p"; done


# run NAME PORT "PIDS…" [wrk args…]
run() {
    local name=$1 port=$2 pids=$3; shift 3
    curl -kfso /dev/null "https://127.0.0.1:$port/1k" || true
    local t0 t1 out reqs rps cpu
    # shellcheck disable=SC2086
    t0=$(ticks $pids)
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "$@" "https://127.0.0.1:$port/1k")
    # shellcheck disable=SC2086
    t1=$(ticks $pids)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    cpu=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN { if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print "nan" }')
    printf '%-16s %-22s %12s %12s\n' "$name" "$CASE" "$rps" "$cpu" | tee -a "$WORK/results.txt"
    echo "$out" | grep -E 'Non-2xx|Socket errors' >&2 || true
}

printf '%-16s %-22s %12s %12s\n' server case req/s cpu-us/req
for mode in keepalive close; do
    extra=()
    CASE="keep-alive"
    if [ "$mode" = close ]; then extra=(-H "Connection: close"); CASE="new connection"; fi
    run nginx-ceiling "$CEIL_PORT" "$CEIL_PID" "${extra[@]}"
    run lacquer "$LQ_PORT" "$LQ_PID" "${extra[@]}"
    run hitch+varnish "$HITCH_PORT" "$HITCH_PID $VA_PID" "${extra[@]}"
    run nginx-cache "$NGC_PORT" "$NGC_PID" "${extra[@]}"
done

echo
cpu() { grep "^$1 *$2" "$WORK/results.txt" | awk '{print $NF}'; }
for c in "keep-alive" "new connection"; do
    lq=$(cpu lacquer "$c"); ce=$(cpu nginx-ceiling "$c"); hv=$(cpu hitch+varnish "$c"); nc=$(cpu nginx-cache "$c")
    awk -v l="$lq" -v c="$ce" -v h="$hv" -v n="$nc" -v k="$c" \
        'BEGIN { printf "%-15s cpu/req: Lacquer/ceiling %.2fx  Lacquer/(Hitch+Varnish) %.2fx  Lacquer/nginx-cache %.2fx\n", k, l/c, l/h, l/n }'
done

# Memory per idle TLS connection: RSS before and after 2000 connections
# that finished their handshake and then say nothing.
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
before=$(rss "$LQ_PID")
python3 - "$LQ_PORT" 2000 "$WORK/idle.ready" <<'PY' & IDLE=$!
import socket, ssl, sys, time, pathlib
port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
conns = [ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost") for _ in range(n)]
pathlib.Path(ready).touch()
time.sleep(30)
PY
PIDS+=($IDLE)
for _ in $(seq 1 300); do [ -e "$WORK/idle.ready" ] && break; sleep 0.1; done
sleep 1
after=$(rss "$LQ_PID")
awk -v b="$before" -v a="$after" 'BEGIN { printf "memory per idle TLS connection: %.1f KiB (RSS %d -> %d KiB over 2000)\n", (a - b) / 2000, b, a }'
