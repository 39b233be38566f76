#!/usr/bin/env bash
# HTTP/2 side by side, in one run: 1 KiB cache hits over HTTP/2 with TLS
# (an ECDSA P-256 certificate, h2 by ALPN), h2load with a few connections
# of 100 streams each, from
#   - nginx answering `return 200` over HTTP/2 (the ceiling),
#   - Lacquer terminating TLS and HTTP/2 itself,
#   - Hitch in front of varnishd with `feature=+http2` (ALPN h2 passed on
#     in PROXY v2), both on the server's CPU,
# each server pinned to CPU 0, h2load and the origin on CPU 1. Prints
# requests/s and server CPU time per request, the ratios to the ceiling
# and to Hitch + Varnish, and the memory Lacquer holds per idle HTTP/2
# connection.
#
# Usage: bench/h2.sh [seconds-per-run]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CLIENTS=4
STREAMS=100

. bench/common.sh
ensure varnishd hitch h2load nginx taskset openssl -- varnish hitch nghttp2-client nginx util-linux openssl
build_lacquer

start_origin
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat "$WORK/key.pem" "$WORK/cert.pem" > "$WORK/combined.pem"
chmod -R a+rX "$WORK"
ONE_K=$(head -c 1024 /dev/zero | tr '\0' 'a')

CEIL_PORT=$(free_port); LQ_PORT=$(free_port); HITCH_PORT=$(free_port); VA_PORT=$(free_port)

# The ceiling: nginx over HTTP/2 and TLS, answering from memory.
cat > "$WORK/ceiling-h2.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx-ceiling-h2.pid;
error_log $WORK/nginx-ceiling-h2.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    http2_max_concurrent_streams $STREAMS;
    server {
        listen 127.0.0.1:$CEIL_PORT ssl http2;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / { default_type text/plain; return 200 "$ONE_K"; }
    }
}
CONF
taskset -c 0 nginx -c "$WORK/ceiling-h2.conf" -p "$WORK" & CEIL_PID=$!; PIDS+=($CEIL_PID)

cat > "$WORK/lacquer-h2.conf" <<CONF
frontend = "[127.0.0.1]:$LQ_PORT"
pem-file = "$WORK/combined.pem"
alpn-protos = "h2, http/1.1"
CONF
taskset -c 0 "$LACQUER" serve -j none -a 127.0.0.1:0 -A "$WORK/lacquer-h2.conf" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/lacquer" -s malloc,256m -p workers=1 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)

taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT,PROXY" -b "127.0.0.1:$ORIGIN_PORT" \
    -p feature=+http2 -n "$WORK/varnish" -s malloc,256m >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)
cat > "$WORK/hitch.conf" <<CONF
frontend = "[127.0.0.1]:$HITCH_PORT"
backend = "[127.0.0.1]:$VA_PORT"
pem-file = "$WORK/combined.pem"
write-proxy-v2 = on
alpn-protos = "h2, http/1.1"
workers = 1
daemon = off
user = "nobody"
CONF
taskset -c 0 hitch --config="$WORK/hitch.conf" >"$WORK/hitch.out" 2>&1 & HITCH_PID=$!; PIDS+=($HITCH_PID)

wait_h2() { for _ in $(seq 1 100); do curl -kfso /dev/null --http2 "https://127.0.0.1:$1/1k" && return 0; sleep 0.1; done; echo "port $1 did not come up" >&2; exit 1; }
for p in "$CEIL_PORT" "$LQ_PORT" "$HITCH_PORT"; do wait_h2 "$p"; done


# run NAME PORT "PIDS…"
run() {
    local name=$1 port=$2 pids=$3
    curl -kfso /dev/null --http2 "https://127.0.0.1:$port/1k" || true
    local t0 t1 out reqs rps cpu proto
    # shellcheck disable=SC2086
    t0=$(ticks $pids)
    out=$(taskset -c 1 h2load -c "$CLIENTS" -m "$STREAMS" -D "$DURATION" "https://127.0.0.1:$port/1k" 2>&1)
    # shellcheck disable=SC2086
    t1=$(ticks $pids)
    proto=$(echo "$out" | awk '/Application protocol:/ {print $3}')
    reqs=$(echo "$out" | awk '/^requests:/ {print $8}')
    rps=$(echo "$out" | awk '/^finished in/ {print $4}')
    cpu=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN { if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print "nan" }')
    printf '%-16s %-6s %12s %12s\n' "$name" "$proto" "$rps" "$cpu" | tee -a "$WORK/results.txt"
    echo "$out" | grep -E '^status codes:' | grep -v ' 0 5xx' >&2 || true
}

printf '%-16s %-6s %12s %12s\n' server proto req/s cpu-us/req
run nginx-ceiling "$CEIL_PORT" "$CEIL_PID"
run lacquer "$LQ_PORT" "$LQ_PID"
run hitch+varnish "$HITCH_PORT" "$HITCH_PID $VA_PID"

echo
cpu() { grep "^$1 " "$WORK/results.txt" | awk '{print $NF}'; }
lq=$(cpu lacquer); ce=$(cpu nginx-ceiling); hv=$(cpu hitch+varnish)
awk -v l="$lq" -v c="$ce" -v h="$hv" \
    'BEGIN { printf "HTTP/2 hits  cpu/req: Lacquer/ceiling %.2fx  Lacquer/(Hitch+Varnish) %.2fx\n", l/c, l/h }'

# Memory per idle HTTP/2 connection: RSS before and after 1000
# connections that finished their handshake and SETTINGS exchange.
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
before=$(rss "$LQ_PID")
python3 - "$LQ_PORT" 1000 "$WORK/idle.ready" <<'PY' & IDLE=$!
import socket, ssl, sys, time, pathlib
port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["h2"])
conns = []
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    # The preface and an empty SETTINGS frame; the server's SETTINGS read.
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    s.recv(4096)
    conns.append(s)
pathlib.Path(ready).touch()
time.sleep(30)
PY
PIDS+=($IDLE)
for _ in $(seq 1 300); do [ -e "$WORK/idle.ready" ] && break; sleep 0.1; done
sleep 1
after=$(rss "$LQ_PID")
awk -v b="$before" -v a="$after" 'BEGIN { printf "memory per idle HTTP/2 connection: %.1f KiB (RSS %d -> %d KiB over 1000)\n", (a - b) / 1000, b, a }'
