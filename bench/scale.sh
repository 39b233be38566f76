#!/usr/bin/env bash
# Many cores, side by side in one run: 1 KiB cache hits from
#   - nginx answering `return 200` (the ceiling; `reuseport deferred`),
#   - Lacquer (-p workers=N),
#   - nginx proxy_cache (worker_processes N),
#   - varnishd (plain HTTP only: it has no TLS or HTTP/2 of its own),
# each server pinned to the first N cores and wrk (h2load for HTTP/2) on
# the cores after them, the origin on the last core. Modes: ka (keep-alive
# HTTP/1.1), close (a connection a request), tls-ka, tls-close (a TLS
# connection a request, ECDSA P-256, TLS 1.3 for every server (nginx's
# packaged default would be 1.2); wrk resumes the session where the
# server lets it, as each server here does by default), tls12-close (the
# same over TLS 1.2, which wrk resumes with no key exchange at all),
# tls-full (TLS 1.3 with resumption off in every server: a full
# handshake a connection), h2 (HTTP/2 by prior knowledge, 10 streams a
# connection). For each mode and N it prints
# requests/s, p50, p99, the server's CPU time per request (user + system,
# all its threads and processes) and how many cores it kept busy, then
# Lacquer's ratios: CPU per request against the ceiling's, throughput
# against nginx proxy_cache's, and how its CPU per request grew from the
# first N to the last against the ceiling's growth.
#
# On a machine with fewer than 4 cores the servers and the load share
# every core (N is the number of workers; use N = the core count).
#
# With BUNDLE=DIR (made by bench/make-bundle.sh) it takes every program,
# library and certificate from DIR and installs and builds nothing, so it
# runs on a bare machine; the origin is then on port 18090, which the
# bundle's precompiled VCL names for a varnishd with no C compiler.
#
# With PROFILE=DIR (and perf installed, or in the bundle) each case's
# measured load is also sampled on the server's cores (perf, cpu-clock,
# with call chains), and the hottest symbols, kernel and user, written to
# DIR/profile.txt: where CPU per request goes, and how it grows with N.
#
# Usage: [BUNDLE=DIR] bench/scale.sh ["1 2 4 8"] [seconds] ["ka close tls-ka tls-close h2"]
#        (tls12-close and tls-full are run when named)
set -euo pipefail
cd "$(dirname "$0")/.."
CORES=$(nproc)
NS="${1:-$( [ "$CORES" -ge 16 ] && echo "1 2 4 8" || echo "1 2" )}"
DURATION="${2:-5}"
MODES="${3:-ka close tls-ka tls-close h2}"

. bench/common.sh
if [ -n "${BUNDLE:-}" ]; then
    BUNDLE=$(cd "$BUNDLE" && pwd)
    export PATH="$BUNDLE/bin:$PATH" LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    LACQUER="$BUNDLE/bin/lacquer"
    mkdir -p /var/log/nginx 2>/dev/null || true
    # A bare machine may lack the user nginx's workers would become.
    if [ "$(id -u)" = 0 ]; then NGINX_USER="user root;"; fi
else
    ensure varnishd wrk nginx h2load taskset openssl -- varnish wrk nginx nghttp2-client util-linux openssl
    build_lacquer
fi
# answers PORT: whether a server on PORT answers GET /1k with a 200 (over
# HTTP/2 by prior knowledge in the h2 mode); needs no curl.
answers() {
    if [ "${MODE:-}" = h2 ]; then
        h2load -n1 -c1 "http://127.0.0.1:$1/1k" 2>/dev/null | grep -q '1 succeeded'
    else
        python3 - "$1" <<'PY2' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"GET /1k HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
sys.exit(0 if s.recv(64).startswith(b"HTTP/1.1 200") else 1)
PY2
    fi
}
ulimit -n 200000 2>/dev/null || ulimit -n 65536 2>/dev/null || true

SHARED=0
if [ "$CORES" -lt 4 ]; then SHARED=1; fi
LAST=$((CORES - 1))
server_cpus() { if [ "$SHARED" = 1 ]; then echo "0-$LAST"; else echo "0-$(($1 - 1))"; fi; }
load_cpus() { if [ "$SHARED" = 1 ]; then echo "0-$LAST"; else echo "$1-$((LAST - 1))"; fi; }
load_threads() { if [ "$SHARED" = 1 ]; then echo "$CORES"; else echo $((LAST - $1)); fi; }

# The origin, on the last core: 1 KiB with a long max-age.
if [ -n "${BUNDLE:-}" ]; then ORIGIN_PORT=18090; else ORIGIN_PORT=$(free_port); fi
mkdir -p "$WORK/www"
head -c 1024 /dev/zero | tr '\0' 'a' > "$WORK/www/1k"
chmod -R a+rX "$WORK"
TEMP_PATHS="client_body_temp_path $WORK/tmp-body; proxy_temp_path $WORK/tmp-proxy;
  fastcgi_temp_path $WORK/tmp-fcgi; uwsgi_temp_path $WORK/tmp-uwsgi; scgi_temp_path $WORK/tmp-scgi;"
cat > "$WORK/origin.conf" <<CONF
${NGINX_USER:-} worker_processes 1; daemon off; pid $WORK/origin.pid; error_log $WORK/origin.err;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 10000000; $TEMP_PATHS
  server { listen 127.0.0.1:$ORIGIN_PORT; root $WORK/www;
    location / { add_header Cache-Control "max-age=3600"; } } }
CONF
taskset -c "$LAST" nginx -c "$WORK/origin.conf" -p "$WORK" & PIDS+=($!)
for _ in $(seq 1 100); do answers "$ORIGIN_PORT" && break; sleep 0.1; done
answers "$ORIGIN_PORT" || { echo "the origin did not come up" >&2; cat "$WORK/origin.err" >&2; exit 1; }

if [ -n "${BUNDLE:-}" ]; then
    cp "$BUNDLE/certs/key.pem" "$BUNDLE/certs/cert.pem" "$WORK/"
else openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
fi
cat "$WORK/key.pem" "$WORK/cert.pem" > "$WORK/combined.pem"
printf 'vcl 4.1;\nbackend default { .host = "127.0.0.1"; .port = "%s"; }\n' "$ORIGIN_PORT" > "$WORK/default.vcl"
chmod -R a+rX "$WORK"
ONE_K=$(head -c 1024 /dev/zero | tr '\0' 'a')
PORT=$(free_port); TLS_PORT=$(free_port)

# tls_settings nginx|lacquer: the mode's TLS versions and resumption, in
# that server's words.
tls_settings() {
    case "$1:$MODE" in
        nginx:tls12-close) echo "ssl_protocols TLSv1.2; ssl_session_cache shared:tls:10m;" ;;
        nginx:tls-full) echo "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache off; ssl_session_tickets off;" ;;
        nginx:*) echo "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:tls:10m;" ;;
        lacquer:tls12-close) echo 'tls-protos = "TLSv1.2"' ;;
        lacquer:tls-full) echo 'session-cache = "0"' ;;
    esac
}

# nginx_conf NAME WORKERS SERVER-BODY: an nginx configuration listening
# on PORT (and TLS_PORT) as the ceiling and the cache both do.
nginx_conf() {
    local h2=""; [ "$MODE" = h2 ] && h2=" http2"
    cat > "$WORK/$1.conf" <<CONF
${NGINX_USER:-} worker_processes $2; daemon off; pid $WORK/$1.pid; error_log $WORK/$1.err;
worker_rlimit_nofile 200000; events { worker_connections 65536; }
http { access_log off; keepalive_requests 10000000; $TEMP_PATHS
  $4
  server { listen 127.0.0.1:$PORT backlog=65535 reuseport deferred$h2;
    listen 127.0.0.1:$TLS_PORT ssl backlog=65535 reuseport deferred;
    ssl_certificate $WORK/cert.pem; ssl_certificate_key $WORK/key.pem;
    $(tls_settings nginx)
    $3 } }
CONF
}

# start SERVER N: starts it pinned; SERVER_PID is its (master) process.
start() {
    local cpus; cpus=$(server_cpus "$2")
    case "$1" in
        ceiling)
            nginx_conf ceiling "$2" "location / { default_type text/plain; return 200 \"$ONE_K\"; }" ""
            exec taskset -c "$cpus" nginx -c "$WORK/ceiling.conf" -p "$WORK" ;;
        nginx)
            rm -rf "$WORK/ngx-cache"
            nginx_conf cache "$2" "location / { proxy_cache c; proxy_http_version 1.1;
                proxy_set_header Connection \"\"; proxy_pass http://origin; }" \
                "proxy_cache_path $WORK/ngx-cache levels=1:2 keys_zone=c:64m max_size=1g;
                 upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 64; }"
            exec taskset -c "$cpus" nginx -c "$WORK/cache.conf" -p "$WORK" ;;
        lacquer)
            rm -rf "$WORK/lq"
            printf 'frontend = "[127.0.0.1]:%s"\npem-file = "%s"\n%s\n' "$TLS_PORT" "$WORK/combined.pem" \
                "$(tls_settings lacquer)" > "$WORK/lq-tls.conf"
            exec taskset -c "$cpus" "$LACQUER" serve -j none -a "127.0.0.1:$PORT" -A "$WORK/lq-tls.conf" \
                -b "127.0.0.1:$ORIGIN_PORT" -n "$WORK/lq" -T none -s malloc,1g -p workers="$2" ;;
        varnishd)
            rm -rf "$WORK/vd"
            local cc=()
            if ! command -v cc >/dev/null && [ -n "${BUNDLE:-}" ]; then cc=(-p "cc_command=exec cp $BUNDLE/vgc.so %o"); fi
            exec taskset -c "$cpus" varnishd -F -j none -n "$WORK/vd" -a "127.0.0.1:$PORT" -T none \
                -f "$WORK/default.vcl" -s malloc,1g -p thread_pool_min=$(($2 * 50)) "${cc[@]}" ;;
    esac >"$WORK/$1.log" 2>&1 </dev/null &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 1 100); do
        answers "$PORT" && return 0
        sleep 0.1
    done
    echo "$1 did not come up (N=$2)" >&2; tail -3 "$WORK/$1.log" >&2
    return 1
}

# tree_ticks PID: CPU ticks (user + system) of PID and all its
# descendants (nginx's and varnishd's workers are their master's
# children).
tree_ticks() {
    python3 - "$1" <<'PY'
import os, sys
children, ticks = {}, {}
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    pid = int(entry)
    children.setdefault(int(fields[1]), []).append(pid)
    ticks[pid] = int(fields[11]) + int(fields[12])
def total(pid):
    return ticks.get(pid, 0) + sum(total(c) for c in children.get(pid, []))
print(total(int(sys.argv[1])))
PY
}

stop() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || break; sleep 0.1; done
}

# load N: runs the mode's load against the server on PORT, warmed first;
# sets REQS, RPS, P50, P99, CPU_US and BUSY.
load() {
    local cpus threads conns url args=()
    cpus=$(load_cpus "$1"); threads=$(load_threads "$1")
    conns=$((threads * 50)); url="http://127.0.0.1:$PORT/1k"
    case "$MODE" in
        close) args=(-H "Connection: close"); conns=$((threads * 16)) ;;
        tls-ka) url="https://127.0.0.1:$TLS_PORT/1k" ;;
        tls-close | tls12-close | tls-full)
            url="https://127.0.0.1:$TLS_PORT/1k"; args=(-H "Connection: close"); conns=$((threads * 16)) ;;
    esac
    local before after t0 t1 out perf_pid=""
    if [ -n "${PROFILE:-}" ]; then
        mkdir -p "$PROFILE"
        perf record -q -e cpu-clock -F 1999 -g -C "$(server_cpus "$1")" -o "$WORK/perf.data" \
            -- sleep "$DURATION" >/dev/null 2>&1 & perf_pid=$!
    fi
    if [ "$MODE" = h2 ]; then
        taskset -c "$cpus" h2load -t"$threads" -c"$conns" -m 10 -D 1 "$url" >/dev/null 2>&1 || true
        before=$(tree_ticks "$SERVER_PID"); t0=$(date +%s.%N)
        out=$(taskset -c "$cpus" h2load -t"$threads" -c"$conns" -m 10 -D "$DURATION" "$url" 2>&1)
        after=$(tree_ticks "$SERVER_PID"); t1=$(date +%s.%N)
        REQS=$(awk '/^requests:/ {print $8}' <<<"$out")
        RPS=$(awk '/^finished in/ {print $4}' <<<"$out")
        P50=$(awk '/^time for request:/ {print $6}' <<<"$out"); P99="max:$(awk '/^time for request:/ {print $5}' <<<"$out")"
    else
        taskset -c "$cpus" wrk -t"$threads" -c"$conns" -d1s "${args[@]}" "$url" >/dev/null 2>&1 || true
        before=$(tree_ticks "$SERVER_PID"); t0=$(date +%s.%N)
        out=$(taskset -c "$cpus" wrk -t"$threads" -c"$conns" -d"${DURATION}s" --latency "${args[@]}" "$url" 2>&1)
        after=$(tree_ticks "$SERVER_PID"); t1=$(date +%s.%N)
        REQS=$(awk '/requests in/ {print $1}' <<<"$out")
        RPS=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
        P50=$(awk '$1 == "50%" {print $2}' <<<"$out"); P99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    fi
    if [ -n "$perf_pid" ]; then
        wait "$perf_pid" || true
        {
            echo "=== $MODE $SERVER_NAME N=$1"
            perf report -i "$WORK/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null |
                grep -v '^#' | grep -v '^$' | head -8
            perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none \
                --percent-limit 0.4 2>/dev/null | grep -v '^#' | grep -v '^$' | head -70
        } >>"$PROFILE/profile.txt"
    fi
    CPU_US=$(awk -v a="$before" -v b="$after" -v hz="$HZ" -v n="${REQS:-0}" \
        'BEGIN { if (n > 0) printf "%.2f", (b - a) / hz * 1e6 / n; else print "n/a" }')
    BUSY=$(awk -v a="$before" -v b="$after" -v hz="$HZ" -v t0="$t0" -v t1="$t1" \
        'BEGIN { printf "%.2f", (b - a) / hz / (t1 - t0) }')
}

echo "cores $CORES ($( [ "$SHARED" = 1 ] && echo "servers and load share them" || echo "server on the first N, load after" )), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-11s %-9s %3s %11s %9s %9s %10s %6s\n' mode server N req/s p50 p99 cpu-us/req cores
declare -A CPU RPS_OF
for MODE in $MODES; do
    for n in $NS; do
        for server in ceiling lacquer nginx varnishd; do
            case "$server:$MODE" in varnishd:tls* | varnishd:h2) continue ;; esac
            start "$server" "$n" || continue
            SERVER_NAME=$server
            load "$n"
            stop
            CPU[$MODE:$server:$n]=$CPU_US; RPS_OF[$MODE:$server:$n]=$RPS
            printf '%-11s %-9s %3s %11s %9s %9s %10s %6s\n' "$MODE" "$server" "$n" "$RPS" "$P50" "$P99" "$CPU_US" "$BUSY"
        done
    done
done

echo
echo "Lacquer's ratios (CPU per request against the ceiling's; req/s against nginx proxy_cache's):"
first=${NS%% *}; last=${NS##* }
for MODE in $MODES; do
    line="$MODE:"
    for n in $NS; do
        line+=$(awk -v l="${CPU[$MODE:lacquer:$n]:-0}" -v c="${CPU[$MODE:ceiling:$n]:-0}" \
            -v r="${RPS_OF[$MODE:lacquer:$n]:-0}" -v g="${RPS_OF[$MODE:nginx:$n]:-0}" -v n="$n" \
            'BEGIN { printf "  N=%s cpu %.2fx req/s %.2fx", n, (c > 0 ? l / c : 0), (g > 0 ? r / g : 0) }')
    done
    if [ "$first" != "$last" ]; then
        line+=$(awk -v l1="${CPU[$MODE:lacquer:$first]:-0}" -v l2="${CPU[$MODE:lacquer:$last]:-0}" \
            -v c1="${CPU[$MODE:ceiling:$first]:-0}" -v c2="${CPU[$MODE:ceiling:$last]:-0}" \
            'BEGIN { if (l1 > 0 && c1 > 0) printf "  growth %.2fx (ceiling %.2fx)", l2 / l1, c2 / c1 }')
    fi
    echo "$line"
done
