#!/usr/bin/env bash
# Parallel ESI, shown rather than asserted: a cached page that includes
# N uncacheable fragments, each taking DELAY seconds at the origin. Times
# the page (sequential requests, one at a time) through Lacquer with
# esi_parallel=N, Lacquer with esi_parallel=1 (serial, as Varnish), and
# varnishd with the same VCL; prints the mean page time of each and the
# ratios.
#
# Usage: bench/esi-parallel.sh [requests] [includes] [delay]   (default 20 10 0.1)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-20}"
INCLUDES="${2:-10}"
DELAY="${3:-0.1}"

. bench/common.sh
ensure varnishd curl -- varnish curl
build_lacquer

ORIGIN_PORT=$(free_port)
python3 bench/esi-origin.py "$ORIGIN_PORT" "$INCLUDES" "$DELAY" & PIDS+=($!)
wait_up "$ORIGIN_PORT"

cat > "$WORK/esi.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$ORIGIN_PORT"; }
sub vcl_recv {
    if (req.url ~ "^/frag/") { return (pass); }
}
sub vcl_backend_response {
    if (bereq.url ~ "^/page") { set beresp.do_esi = true; }
}
VCL

# varnishd's worker user reads the VCL from the work directory.
chmod -R a+rX "$WORK"
P_PORT=$(free_port); S_PORT=$(free_port); V_PORT=$(free_port)
"$LACQUER" serve -j none -a "127.0.0.1:$P_PORT" -f "$WORK/esi.vcl" -n "$WORK/p" \
    -p esi_parallel="$INCLUDES" >"$WORK/p.out" 2>&1 & PIDS+=($!)
"$LACQUER" serve -j none -a "127.0.0.1:$S_PORT" -f "$WORK/esi.vcl" -n "$WORK/s" \
    -p esi_parallel=1 >"$WORK/s.out" 2>&1 & PIDS+=($!)
varnishd -F -a "127.0.0.1:$V_PORT" -f "$WORK/esi.vcl" -n "$WORK/v" \
    -s malloc,64m >"$WORK/v.out" 2>&1 & PIDS+=($!)
wait_up "$P_PORT"; wait_up "$S_PORT"; wait_up "$V_PORT"

# mean_time PORT: the mean of REQUESTS page times, in milliseconds, after
# one request that caches the page.
mean_time() {
    curl -fso /dev/null "http://127.0.0.1:$1/page"
    local sum=0 t
    for _ in $(seq 1 "$REQUESTS"); do
        t=$(curl -fso /dev/null -w '%{time_total}' "http://127.0.0.1:$1/page")
        sum=$(awk -v s="$sum" -v t="$t" 'BEGIN { print s + t }')
    done
    awk -v s="$sum" -v n="$REQUESTS" 'BEGIN { printf "%.1f", s / n * 1000 }'
}

P=$(mean_time "$P_PORT"); S=$(mean_time "$S_PORT"); V=$(mean_time "$V_PORT")
echo "page with $INCLUDES includes of ${DELAY}s each, mean of $REQUESTS requests:"
echo "  lacquer esi_parallel=$INCLUDES: ${P} ms"
echo "  lacquer esi_parallel=1:  ${S} ms"
echo "  varnishd (serial):       ${V} ms"
awk -v p="$P" -v s="$S" -v v="$V" 'BEGIN {
    printf "  varnishd / lacquer parallel: %.1fx faster page; serial / parallel: %.1fx\n", v / p, s / p }'
