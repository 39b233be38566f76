#!/usr/bin/env bash
# HTTP/3 side by side with HTTP/2, in one run, on one Lacquer (one
# worker, pinned to CPU 0; the clients and the origin on CPU 1): 1 KiB
# cache hits
#   - over HTTP/2 with TLS: h2load, one connection of 100 streams;
#   - over HTTP/3: ngtcp2's gtlsclient, one connection, the same number
#     of requests (it keeps as many streams open as the server allows);
#   - and a connection a request over HTTP/3, each resuming with 0-RTT
#     (gtlsclient with a kept session), against HTTP/2 over TLS with
#     a resumed session a request (h2load -c N -n N).
# Prints the server's CPU time per request for each, and the ratios of
# HTTP/3 to HTTP/2. (Neither client reports a p99 a request; h2load's
# mean time is printed for HTTP/2.)
#
# Usage: bench/h3.sh [requests]   (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-20000}"
CONNECTIONS=200

. bench/common.sh
ensure h2load gtlsclient taskset openssl -- nghttp2-client ngtcp2-client util-linux openssl
build_lacquer

start_origin
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat "$WORK/key.pem" "$WORK/cert.pem" > "$WORK/combined.pem"
LQ_PORT=$(free_port)
cat > "$WORK/lacquer-h3.conf" <<CONF
frontend = "[127.0.0.1]:$LQ_PORT"
pem-file = "$WORK/combined.pem"
alpn-protos = "h2, http/1.1"
session-cache = 10000
quic = on
CONF
taskset -c 0 "$LACQUER" serve -j none -a 127.0.0.1:0 -A "$WORK/lacquer-h3.conf" \
    -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/lacquer" -s malloc,256m -p workers=1 \
    -p h3_max_concurrent_streams=100 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
for _ in $(seq 1 100); do
    curl -kfso /dev/null --http2 "https://localhost:$LQ_PORT/1k" --resolve "localhost:$LQ_PORT:127.0.0.1" && break
    sleep 0.1
done
URL="https://localhost:$LQ_PORT/1k"
# h2load by address (localhost could be ::1 first), the same object.
H2_URL="https://127.0.0.1:$LQ_PORT/1k"

# measure NAME REQUESTS COMMAND…: the server's CPU time per request.
measure() {
    local name=$1 n=$2 t0 t1
    shift 2
    t0=$(ticks "$LQ_PID")
    "$@" >"$WORK/$name.out" 2>&1 || true
    t1=$(ticks "$LQ_PID")
    awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'
}

gtls() {
    taskset -c 1 gtlsclient -q --no-http-dump --no-quic-dump --exit-on-all-streams-close \
        --sni localhost "$@"
}

# Warm: the object in the cache, a session for 0-RTT.
taskset -c 1 h2load -n 10 -c 1 "$H2_URL" >/dev/null 2>&1
gtls --session-file="$WORK/session" --tp-file="$WORK/tp" 127.0.0.1 "$LQ_PORT" "$URL" >/dev/null 2>&1 || true

h2=$(measure h2 "$REQUESTS" taskset -c 1 h2load -n "$REQUESTS" -c 1 -m 100 "$H2_URL")
h2_done=$(awk '/^requests:/ {print $8}' "$WORK/h2.out")
h2_mean=$(awk '/^time for request:/ {print $6}' "$WORK/h2.out")
h3=$(measure h3 "$REQUESTS" gtls -n "$REQUESTS" 127.0.0.1 "$LQ_PORT" "$URL")
h2c=$(measure h2conn "$CONNECTIONS" taskset -c 1 h2load -n "$CONNECTIONS" -c "$CONNECTIONS" "$H2_URL")
h3c_loop() {
    for _ in $(seq 1 "$CONNECTIONS"); do
        gtls --session-file="$WORK/session" --tp-file="$WORK/tp" 127.0.0.1 "$LQ_PORT" "$URL" || true
    done
}
h3c=$(measure h3conn "$CONNECTIONS" h3c_loop)
early=$("$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "MAIN.h3_early" { print $2 }')
streams=$("$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "MAIN.h3_streams" { print $2 }')

printf '%-34s %12s\n' case cpu-us/req
printf '%-34s %12s\n' "HTTP/2 hits (1 conn, 100 streams)" "$h2" "HTTP/3 hits (1 conn)" "$h3" \
    "HTTP/2, a TLS connection a request" "$h2c" "HTTP/3, 0-RTT, a connection a request" "$h3c"
echo "HTTP/2 requests done: $h2_done of $REQUESTS (mean $h2_mean a request); HTTP/3 streams taken: $streams; taken in 0-RTT early data: $early"
awk -v a="$h3" -v b="$h2" -v c="$h3c" -v d="$h2c" 'BEGIN {
    printf "HTTP/3 / HTTP/2 cpu a hit: %.2fx (bar: <= 1.5x); a connection a request: %.2fx\n", a / b, c / d }'
