#!/usr/bin/env bash
# HTTP/3 side by side with HTTP/2, in one run, on one Lacquer (one
# worker, pinned to CPU 0; the clients and the origin on CPU 1): 1 KiB
# cache hits
#   - over HTTP/2 with TLS and over HTTP/3, by the same client (the
#     `load` example: one connection, each request's latency timed):
#     with 100 requests in flight, for the server's CPU time a request;
#     then with one at a time, for the p99 latency on loopback (with
#     many in flight, latency is the client's queue: its own cost);
#   - and by other clients: h2load over HTTP/2 (one connection, 100
#     streams), ngtcp2's gtlsclient over HTTP/3 (one connection, as many
#     streams as the server allows, 100);
#   - and a connection a request over HTTP/3, each resuming with 0-RTT
#     (gtlsclient with a kept session), against HTTP/2 over TLS with
#     a resumed session a request (h2load -c N -n N);
#   - then a second Lacquer with two workers, on both CPUs, and four
#     `load` clients at once (a connection each, 50 streams), over
#     HTTP/2 and over HTTP/3: QUIC has an endpoint on each worker, and
#     each connection is served where its endpoint took it, as a TCP
#     connection is.
# Prints the server's CPU time per request for each, and the ratios of
# HTTP/3 to HTTP/2.
#
# Usage: bench/h3.sh [requests]   (default 20000; a quarter of them
# one at a time)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-20000}"
CONNECTIONS=200

. bench/common.sh
ensure h2load gtlsclient taskset openssl -- nghttp2-client ngtcp2-client util-linux openssl
build_lacquer
cargo build --release --quiet --example load -p lacquer
LOAD="$PWD/target/release/examples/load"

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
# start_lacquer NAME CONF WORKERS [taskset -c N]: a Lacquer on CONF's
# TLS listener, up once it answers there; its pid in STARTED.
start_lacquer() {
    local name=$1 conf=$2 workers=$3 port
    shift 3
    port=$(sed -n 's/^frontend = "\[127.0.0.1\]:\([0-9]*\)"/\1/p' "$conf")
    "$@" "$LACQUER" serve -j none -a 127.0.0.1:0 -A "$conf" \
        -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/$name" -s malloc,256m -p workers="$workers" \
        -p h3_max_concurrent_streams=100 >"$WORK/$name.out" 2>&1 & STARTED=$!; PIDS+=($STARTED)
    for _ in $(seq 1 100); do
        curl -kfso /dev/null --http2 "https://localhost:$port/1k" --resolve "localhost:$port:127.0.0.1" && break
        sleep 0.1
    done
}
start_lacquer lacquer "$WORK/lacquer-h3.conf" 1 taskset -c 0
LQ_PID=$STARTED
URL="https://localhost:$LQ_PORT/1k"
# h2load by address (localhost could be ::1 first), the same object.
H2_URL="https://127.0.0.1:$LQ_PORT/1k"

# measure NAME REQUESTS COMMAND…: the server's CPU time per request
# (the server MEASURED, $LQ_PID unless set).
measure() {
    local name=$1 n=$2 t0 t1 pid=${MEASURED:-$LQ_PID}
    shift 2
    t0=$(ticks "$pid")
    "$@" >"$WORK/$name.out" 2>&1 || true
    t1=$(ticks "$pid")
    awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'
}

gtls() {
    taskset -c 1 gtlsclient -q --no-http-dump --no-quic-dump --exit-on-all-streams-close \
        --sni localhost "$@"
}

# Warm: the object in the cache, a session for 0-RTT.
taskset -c 1 h2load -n 10 -c 1 "$H2_URL" >/dev/null 2>&1
gtls --session-file="$WORK/session" --tp-file="$WORK/tp" 127.0.0.1 "$LQ_PORT" "$URL" >/dev/null 2>&1 || true

# load PROTOCOL REQUESTS STREAMS
load() { taskset -c 1 "$LOAD" "$1" "127.0.0.1:$LQ_PORT" localhost /1k "$2" "$3"; }
h2=$(measure h2 "$REQUESTS" load h2 "$REQUESTS" 100)
h3=$(measure h3 "$REQUESTS" load h3 "$REQUESTS" 100)
ONE=$((REQUESTS / 4))
measure h2one "$ONE" load h2 "$ONE" 1 >/dev/null
measure h3one "$ONE" load h3 "$ONE" 1 >/dev/null
h2l=$(measure h2l "$REQUESTS" taskset -c 1 h2load -n "$REQUESTS" -c 1 -m 100 "$H2_URL")
h3g=$(measure h3g "$REQUESTS" gtls -n "$REQUESTS" 127.0.0.1 "$LQ_PORT" "$URL")
p99() { sed -n 's/.* p99 \([0-9.]*\) .*/\1/p' "$WORK/$1.out"; }
h2c=$(measure h2conn "$CONNECTIONS" taskset -c 1 h2load -n "$CONNECTIONS" -c "$CONNECTIONS" "$H2_URL")
h3c_loop() {
    for _ in $(seq 1 "$CONNECTIONS"); do
        gtls --session-file="$WORK/session" --tp-file="$WORK/tp" 127.0.0.1 "$LQ_PORT" "$URL" || true
    done
}
h3c=$(measure h3conn "$CONNECTIONS" h3c_loop)
# Two workers, four connections at once.
LQ2_PORT=$(free_port)
sed "s/:$LQ_PORT\"/:$LQ2_PORT\"/" "$WORK/lacquer-h3.conf" >"$WORK/lacquer-h3-2.conf"
start_lacquer lacquer2 "$WORK/lacquer-h3-2.conf" 2
MEASURED=$STARTED
# four PROTOCOL REQUESTS: four clients at once, a quarter of the requests each.
four() {
    local clients=()
    for _ in 1 2 3 4; do
        "$LOAD" "$1" "127.0.0.1:$LQ2_PORT" localhost /1k $(($2 / 4)) 50 >/dev/null 2>&1 & clients+=($!)
    done
    wait "${clients[@]}"
}
four h3 400
h2w=$(measure h2w "$REQUESTS" four h2 "$REQUESTS")
h3w=$(measure h3w "$REQUESTS" four h3 "$REQUESTS")
unset MEASURED

early=$("$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "MAIN.h3_early" { print $2 }')
streams=$("$LACQUER" stat -n "$WORK/lacquer" -1 | awk '$1 == "MAIN.h3_streams" { print $2 }')

printf '%-40s %12s\n' case cpu-us/req
printf '%-40s %12s\n' "HTTP/2 hits (load, 100 streams)" "$h2" "HTTP/3 hits (load, 100 streams)" "$h3" \
    "HTTP/2 hits (h2load, 100 streams)" "$h2l" "HTTP/3 hits (gtlsclient)" "$h3g" \
    "HTTP/2, a TLS connection a request" "$h2c" "HTTP/3, 0-RTT, a connection a request" "$h3c" \
    "HTTP/2 hits, 2 workers, 4 connections" "$h2w" "HTTP/3 hits, 2 workers, 4 connections" "$h3w"
for f in h2 h3 h2one h3one; do echo "$f: $(cat "$WORK/$f.out")"; done
echo "HTTP/3 streams taken: $streams; taken in 0-RTT early data: $early"
awk -v a="$h3" -v b="$h2" -v g="$h3g" -v l="$h2l" -v c="$h3c" -v d="$h2c" -v p="$(p99 h3one)" -v q="$(p99 h2one)" \
    -v w="$h3w" -v x="$h2w" 'BEGIN {
    printf "HTTP/3 / HTTP/2 cpu a hit: %.2fx by load, %.2fx gtlsclient / h2load (bar: <= 1.5x)\n", a / b, g / l
    printf "on 2 workers, 4 connections: %.2fx\n", w / x
    printf "p99 one at a time: %.2fx (bar: <= 1.10x); a connection a request: %.2fx\n", p / q, c / d }'
