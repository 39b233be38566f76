#!/usr/bin/env bash
# The meltdown of seed 000, reproduced: a cached ESI page whose one
# include is uncacheable and comes from an origin that slows down as work
# piles up on it (BASE_MS + PER_MS per request in flight, and it finishes
# abandoned work), under CLIENTS clients that give up after PATIENCE
# seconds and come straight back, for SECONDS.
#
# Each setup gets a fresh origin. The cache runs on CPU 0, origin and load
# on CPU 1. For each it prints what the clients saw (responses/s, pages
# that carried the fragment, give-ups, p50/p99/longest response), the
# cache's CPU during the load, the origin's peak of requests in flight,
# and, 1 s and 10 s after the load stopped, how many origin requests the
# cache was still waiting for and the cache's CPU in the second before.
#
# Setups (SETUPS, default all): varnishd with the seed's VCL; the same
# with .max_connections (Varnish 7.1 has no wait queue: a full backend
# fails at once); Lacquer with the seed's VCL; Lacquer with
# .max_connections and a wait queue.
#
# Usage: bench/meltdown.sh [seconds] [clients] [patience]   (default 60 250 10)
#        BASE_MS=20 PER_MS=40 MAX_CONN=25 WAIT_TIMEOUT=1 WAIT_LIMIT=100
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_LOAD="${1:-60}"
CLIENTS="${2:-250}"
PATIENCE="${3:-10}"
BASE_MS="${BASE_MS:-20}"
PER_MS="${PER_MS:-40}"
MAX_CONN="${MAX_CONN:-25}"
WAIT_TIMEOUT="${WAIT_TIMEOUT:-1}"
WAIT_LIMIT="${WAIT_LIMIT:-100}"
SETUPS="${SETUPS:-varnishd varnishd-max lacquer lacquer-max}"

. bench/common.sh
ensure varnishd curl taskset -- varnish curl util-linux
build_lacquer
ulimit -n 65536 2>/dev/null || true

# seed_vcl PORT [BACKEND_EXTRA]: the seed's VCL (Varnish 4.1 syntax kept
# as 4.1), with the backend on PORT.
seed_vcl() {
    cat <<VCL
vcl 4.1;
backend default {
    .host = "127.0.0.1";
    .port = "$1";
    ${2:-}
}
sub vcl_backend_fetch {
    # announce to backend that varnish can handle esi
    set bereq.http.Surrogate-Capability = "abc=ESI/1.0";
}
sub vcl_backend_response {
    # Check for ESI acknowledgement and remove Surrogate-Control header
    if (beresp.http.Surrogate-Control ~ "ESI/1.0") {
        unset beresp.http.Surrogate-Control;
        set beresp.do_esi = true;
        set beresp.do_gzip = true;
    }
}
VCL
}

pct() { awk -v a="$1" -v b="$2" -v s="$3" -v hz="$HZ" 'BEGIN { printf "%.0f%%", (b - a) / hz / s * 100 }'; }
stat_of() { curl -fs "http://127.0.0.1:$1/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
field() { python3 -c "import json,sys; v=json.loads(sys.argv[1]).get('$2'); print(v if not isinstance(v, dict) else ' '.join('%s:%s' % kv for kv in sorted(v.items())))" "$1"; }

# wait_page PORT: until the cache answers (the page, which primes it).
wait_page() {
    for _ in $(seq 1 100); do curl -fso /dev/null -m 5 "http://127.0.0.1:$1/" && return 0; sleep 0.1; done
    echo "port $1 did not come up" >&2; exit 1
}

printf '%-13s %7s %9s %8s %6s %8s %8s %8s %6s %7s %12s %12s\n' \
    setup resp/s frag-pages gave-up errors p50-ms p99-ms max-ms cpu peak-be "waiting+1s" "waiting+10s"
declare -A RESULT
for setup in $SETUPS; do
    ORIGIN_PORT=$(free_port)
    taskset -c 1 python3 bench/meltdown.py origin "$ORIGIN_PORT" "$BASE_MS" "$PER_MS" & ORIGIN_PID=$!
    for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$ORIGIN_PORT/stats" && break; sleep 0.1; done
    PORT=$(free_port)
    dir="$WORK/$setup"; mkdir -p "$dir"
    case "$setup" in
        *-max) seed_vcl "$ORIGIN_PORT" ".max_connections = $MAX_CONN;" > "$dir/seed.vcl" ;;
        *) seed_vcl "$ORIGIN_PORT" > "$dir/seed.vcl" ;;
    esac
    chmod -R a+rX "$WORK"
    case "$setup" in
        varnishd*)
            taskset -c 0 varnishd -F -a "127.0.0.1:$PORT" -f "$dir/seed.vcl" -n "$dir/n" \
                -s malloc,256m -p feature=+esi_disable_xml_check >"$dir/out" 2>&1 & CACHE_PID=$! ;;
        lacquer-max)
            taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -f "$dir/seed.vcl" -n "$dir/n" \
                -p feature=+esi_disable_xml_check -p backend_wait_timeout="$WAIT_TIMEOUT" \
                -p backend_wait_limit="$WAIT_LIMIT" >"$dir/out" 2>&1 & CACHE_PID=$! ;;
        lacquer)
            taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -f "$dir/seed.vcl" -n "$dir/n" \
                -p feature=+esi_disable_xml_check >"$dir/out" 2>&1 & CACHE_PID=$! ;;
        *) echo "unknown setup $setup" >&2; exit 1 ;;
    esac
    wait_page "$PORT"

    before=$(ticks "$CACHE_PID")
    load=$(taskset -c 1 python3 bench/meltdown.py load "$PORT" "$CLIENTS" "$SECONDS_LOAD" "$PATIENCE")
    stopped=$(ticks "$CACHE_PID")
    sleep 1
    at1=$(ticks "$CACHE_PID"); waiting1=$(stat_of "$ORIGIN_PORT" waited_for)
    sleep 8
    at9=$(ticks "$CACHE_PID")
    sleep 1
    at10=$(ticks "$CACHE_PID"); waiting10=$(stat_of "$ORIGIN_PORT" waited_for)
    peak=$(stat_of "$ORIGIN_PORT" peak_in_flight)

    printf '%-13s %7s %9s %8s %6s %8s %8s %8s %6s %7s %12s %12s\n' "$setup" \
        "$(field "$load" per_second)" "$(field "$load" with_fragment)" "$(field "$load" gave_up)" \
        "$(field "$load" errors)" "$(field "$load" p50_ms)" "$(field "$load" p99_ms)" \
        "$(field "$load" max_ms)" "$(pct "$before" "$stopped" "$SECONDS_LOAD")" "$peak" \
        "$waiting1 ($(pct "$stopped" "$at1" 1))" "$waiting10 ($(pct "$at9" "$at10" 1))"
    RESULT[$setup]="$load"
    kill "$CACHE_PID" "$ORIGIN_PID" 2>/dev/null || true
    wait "$CACHE_PID" "$ORIGIN_PID" 2>/dev/null || true
done
echo
echo "statuses seen:"
for setup in $SETUPS; do echo "  $setup: $(field "${RESULT[$setup]}" status)"; done
echo "waiting+Ns: origin requests the cache still held a connection open for, N s after"
echo "the load stopped (and the cache's CPU in the second before)."
