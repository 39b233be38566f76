#!/usr/bin/env bash
# What the typical VCL costs, measured side by side: two Lacquer instances
# on CPU 0 at once, one with the built-in VCL (-b, case a) and one with
# bench/typical.vcl (case e), each driven by its own wrk on CPU 1 for the
# same seconds. Both see the same machine noise, so the ratio of their CPU
# time per request is steadier than sequential runs give. Prints each
# round and the mean ratio (e)/(a).
#
# Usage: bench/vcl-cost.sh [seconds-per-round] [rounds]   (default 5 6)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-5}"
ROUNDS="${2:-6}"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need wrk || ! need nginx || ! need taskset || ! need perf; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx util-linux linux-perf >/dev/null
fi
cargo build --release --quiet -p lacquer
LACQUER="$PWD/target/release/lacquer"

. bench/common.sh

ORIGIN_PORT=$(free_port); A_PORT=$(free_port); E_PORT=$(free_port)
mkdir -p "$WORK/www"
head -c 1024 /dev/zero | tr '\0' 'a' > "$WORK/www/1k"
chmod -R a+rX "$WORK"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        root $WORK/www;
        location / { add_header Cache-Control "max-age=3600"; }
    }
}
CONF
taskset -c 1 nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
sed "s/ORIGIN_PORT/$ORIGIN_PORT/" bench/typical.vcl > "$WORK/typical.vcl"
taskset -c 0 "$LACQUER" serve -a "127.0.0.1:$A_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/a" -s malloc,256m -p workers=1 >"$WORK/a.out" 2>&1 & A_PID=$!; PIDS+=($A_PID)
taskset -c 0 "$LACQUER" serve -a "127.0.0.1:$E_PORT" -f "$WORK/typical.vcl" \
    -n "$WORK/e" -s malloc,256m -p workers=1 >"$WORK/e.out" 2>&1 & E_PID=$!; PIDS+=($E_PID)
wait_up "$ORIGIN_PORT"; wait_up "$A_PORT"; wait_up "$E_PORT"

# Both instances get the same request bytes, so the ratio is the VCL's
# cost and not the cost of parsing longer requests. The built-in VCL would
# pass a request that carries a Cookie, so case (a) carries a header of the
# same length under another name.
COOKIE="_ga=GA1.2.3; __utmz=1.2.3; _gid=GA1.9"
PLAIN=(-H "X-Cooky: $COOKIE" -H "Accept-Encoding: br, gzip, deflate")
TYPICAL=(-H "Cookie: $COOKIE" -H "Accept-Encoding: br, gzip, deflate")
per_request() { awk -F, -v n="$2" '/task-clock/ { printf "%.3f", $1 * 1000 / n }' "$1"; }
printf '%-6s %14s %14s %8s\n' round "a cpu-us/req" "e cpu-us/req" "e/a"
sum_a=0; sum_e=0
for r in $(seq 1 "$ROUNDS"); do
    perf stat -x, -e task-clock -p "$A_PID" -o "$WORK/a.stat" -- sleep "$DURATION" >/dev/null 2>&1 & SA=$!
    perf stat -x, -e task-clock -p "$E_PID" -o "$WORK/e.stat" -- sleep "$DURATION" >/dev/null 2>&1 & SE=$!
    taskset -c 1 wrk -t1 -c50 -d"${DURATION}s" "${PLAIN[@]}" "http://127.0.0.1:$A_PORT/1k" > "$WORK/a.wrk" & WA=$!
    taskset -c 1 wrk -t1 -c50 -d"${DURATION}s" "${TYPICAL[@]}" "http://127.0.0.1:$E_PORT/1k" > "$WORK/e.wrk"
    wait "$WA" "$SA" "$SE"
    na=$(awk '/requests in/ {print $1}' "$WORK/a.wrk"); ne=$(awk '/requests in/ {print $1}' "$WORK/e.wrk")
    a=$(per_request "$WORK/a.stat" "$na"); e=$(per_request "$WORK/e.stat" "$ne")
    printf '%-6s %14s %14s %8s\n' "$r" "$a" "$e" "$(awk -v a="$a" -v e="$e" 'BEGIN { printf "%.3f", e / a }')"
    sum_a=$(awk -v s="$sum_a" -v x="$a" 'BEGIN { print s + x }'); sum_e=$(awk -v s="$sum_e" -v x="$e" 'BEGIN { print s + x }')
done
echo "mean (e)/(a): $(awk -v a="$sum_a" -v e="$sum_e" 'BEGIN { printf "%.3f", e / a }')x CPU per request with the typical VCL"
