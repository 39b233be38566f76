#!/usr/bin/env bash
# Side-by-side benchmark: the same origin served through Lacquer and through
# varnishd, each pinned to CPU 0, with wrk (and the origin) on CPU 1, plus a
# static nginx answering from memory on CPU 0 as the ceiling for case (a).
#
# Cases: (a) 1 KiB cached object, 50 keep-alive connections; (b) the same,
# one request per connection; (c) a 1 MiB cached object; (d) a pass to the
# origin; (e) case (a) through bench/typical.vcl, about 50 lines of typical
# rules, with cookies and Accept-Encoding to normalise. Prints requests/s,
# p50, p99 and server CPU time per request, and the ratios Lacquer/Varnish
# and (e)/(a). Then (f): case (e) again while a new program is loaded and
# switched to every second through the management interface, counting
# every answer that was not a 2xx and every socket error.
#
# Usage: bench/run.sh [seconds-per-run]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CONNS=50

. bench/common.sh
ensure varnishd wrk nginx taskset -- varnish wrk nginx util-linux
build_lacquer
[ -n "${BENCH_DEBUG:-}" ] && trap 'cat "$WORK"/*.out "$WORK"/*.err 2>/dev/null; cleanup' EXIT

CEIL_PORT=$(free_port); LQ_PORT=$(free_port); VA_PORT=$(free_port)
LQV_PORT=$(free_port); VAV_PORT=$(free_port)

# The origin: static files (1 KiB, 1 MiB) and a small dynamic answer for
# pass, on CPU 1 beside the load generator.
start_origin
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'b' > "$WORK/www/1m"
cp "$WORK/www/1k" "$WORK/www/pass"
chmod -R a+rX "$WORK"
start_ceiling "$CEIL_PORT"

taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$LQ_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/lacquer" -s malloc,256m -p workers=1 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -n "$WORK/varnish" -s malloc,256m >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)

sed "s/ORIGIN_PORT/$ORIGIN_PORT/" bench/typical.vcl > "$WORK/typical.vcl"
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$LQV_PORT" -f "$WORK/typical.vcl" \
    -n "$WORK/lacquer-vcl" -s malloc,256m -p workers=1 >"$WORK/lacquer-vcl.out" 2>&1 & LQV_PID=$!; PIDS+=($LQV_PID)
taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VAV_PORT" -f "$WORK/typical.vcl" \
    -n "$WORK/varnish-vcl" -s malloc,256m >"$WORK/varnish-vcl.out" 2>&1 & VAV_PID=$!; PIDS+=($VAV_PID)

wait_up "$ORIGIN_PORT"; wait_up "$LQ_PORT"; wait_up "$VA_PORT"; wait_up "$CEIL_PORT"
wait_up "$LQV_PORT"; wait_up "$VAV_PORT"


# run NAME PID PORT PATH [wrk args…] -> prints one result line
run() {
    local name=$1 pid=$2 port=$3 path=$4; shift 4
    curl -fso /dev/null "http://127.0.0.1:$port$path" "$@" 2>/dev/null || true
    local t0 t1 out
    t0=$(ticks "$pid")
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$@" "http://127.0.0.1:$port$path")
    t1=$(ticks "$pid")
    local reqs rps p50 p99
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p50=$(echo "$out" | awk '$1=="50%" {print $2}')
    p99=$(echo "$out" | awk '$1=="99%" {print $2}')
    local errors
    errors=$(echo "$out" | awk '/Non-2xx|Socket errors/ {printf "%s ", $0}')
    local cpu_us
    cpu_us=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN { if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print "nan" }')
    printf '%-10s %-30s %12s %10s %10s %12s\n' "$name" "$CASE" "$rps" "$p50" "$p99" "$cpu_us"
    if [ -n "$errors" ]; then echo "  ! $name $CASE: $errors" >&2; fi
}

to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us/,"",v); print v/1000 } else if (v ~ /ms$/) { sub(/ms/,"",v); print v } else if (v ~ /s$/) { sub(/s/,"",v); print v*1000 } else print v }'; }

RESULTS="$WORK/results.txt"
printf '%-10s %-30s %12s %10s %10s %12s\n' server case req/s p50 p99 cpu-us/req | tee "$RESULTS"
for spec in "a|1 KiB hit, keep-alive|/1k|" "b|1 KiB hit, new connection|/1k|close" "c|1 MiB hit|/1m|" "d|pass|/pass|cookie"; do
    IFS='|' read -r id label path mode <<<"$spec"
    CASE="($id) $label"
    extra=()
    [ "$mode" = close ] && extra=(-H "Connection: close")
    [ "$mode" = cookie ] && extra=(-H "Cookie: session=1")
    run lacquer "$LQ_PID" "$LQ_PORT" "$path" "${extra[@]}" | tee -a "$RESULTS"
    run varnish "$VA_PID" "$VA_PORT" "$path" "${extra[@]}" | tee -a "$RESULTS"
    if [ "$id" = a ]; then
        run nginx "$CEIL_PID" "$CEIL_PORT" / "${extra[@]}" | tee -a "$RESULTS"
    fi
done
TYPICAL=(-H "Cookie: _ga=GA1.2.3; __utmz=1.2.3; _gid=GA1.9" -H "Accept-Encoding: br, gzip, deflate")
CASE="(e) 1 KiB hit, typical VCL"
run lacquer "$LQV_PID" "$LQV_PORT" /1k "${TYPICAL[@]}" | tee -a "$RESULTS"
run varnish "$VAV_PID" "$VAV_PORT" /1k "${TYPICAL[@]}" | tee -a "$RESULTS"

echo
echo "Ratios (Lacquer / Varnish; CPU also Lacquer / nginx for case a):"
for id in a b c d e; do
    lq=$(grep "^lacquer *($id)" "$RESULTS"); va=$(grep "^varnish *($id)" "$RESULTS")
    lq_rps=$(echo "$lq" | awk '{print $(NF-3)}'); va_rps=$(echo "$va" | awk '{print $(NF-3)}')
    lq_p99=$(to_ms "$(echo "$lq" | awk '{print $(NF-1)}')"); va_p99=$(to_ms "$(echo "$va" | awk '{print $(NF-1)}')")
    lq_cpu=$(echo "$lq" | awk '{print $NF}'); va_cpu=$(echo "$va" | awk '{print $NF}')
    line=$(awk -v a="$lq_rps" -v b="$va_rps" -v c="$lq_cpu" -v d="$va_cpu" -v e="$lq_p99" -v f="$va_p99" \
        'BEGIN { printf "req/s %.2fx  cpu/req %.2fx  p99 %.3f ms vs %.3f ms", a/b, c/d, e, f }')
    if [ "$id" = a ]; then
        ng=$(grep "^nginx" "$RESULTS"); ng_cpu=$(echo "$ng" | awk '{print $NF}'); ng_rps=$(echo "$ng" | awk '{print $(NF-3)}')
        line="$line  | vs nginx: req/s $(awk -v a="$lq_rps" -v b="$ng_rps" 'BEGIN{printf "%.2f", a/b}')x cpu/req $(awk -v a="$lq_cpu" -v b="$ng_cpu" 'BEGIN{printf "%.2f", a/b}')x"
    fi
    echo "($id) $line"
done

for server in lacquer varnish; do
    a=$(grep "^$server *(a)" "$RESULTS" | awk '{print $NF}'); e=$(grep "^$server *(e)" "$RESULTS" | awk '{print $NF}')
    echo "(e)/(a) $server: cpu/req $(awk -v a="$a" -v e="$e" 'BEGIN{printf "%.2f", e/a}')x with the typical VCL"
done

# (f) Reload under load: while wrk runs case (e), load the program again
# under a new name, switch to it and discard the one before, every second.
reload_loop() {
    local kind=$1 dir=$2 i=0
    while [ ! -e "$WORK/stop-reload" ]; do
        i=$((i + 1))
        if [ "$kind" = lacquer ]; then
            adm=("$LACQUER" adm -n "$dir")
        else
            adm=(varnishadm -n "$dir")
        fi
        "${adm[@]}" vcl.load "r$i" "$WORK/typical.vcl" >/dev/null
        "${adm[@]}" vcl.use "r$i" >/dev/null && echo ok >>"$WORK/switches-$kind"
        [ $i -gt 1 ] && "${adm[@]}" vcl.discard "r$((i - 1))" >/dev/null
        sleep 1
    done
}
echo
echo "(f) reload under load: program switched every second during case (e)"
for server in lacquer varnish; do
    rm -f "$WORK/stop-reload"; : >"$WORK/switches-$server"
    if [ "$server" = lacquer ]; then port=$LQV_PORT; dir="$WORK/lacquer-vcl"; else port=$VAV_PORT; dir="$WORK/varnish-vcl"; fi
    taskset -c 1 bash -c "$(declare -f reload_loop); WORK='$WORK' LACQUER='$LACQUER' reload_loop $server '$dir'" & LOOP=$!
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "${TYPICAL[@]}" "http://127.0.0.1:$port/1k")
    touch "$WORK/stop-reload"; wait "$LOOP" 2>/dev/null || true
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}'); non2xx=${non2xx:-0}
    sockerr=$(echo "$out" | awk '/Socket errors/ {sub(/.*Socket errors: /, ""); print}'); sockerr=${sockerr:-none}
    printf '%-10s %s requests, %s switches, %s not 2xx, socket errors: %s\n' \
        "$server" "$reqs" "$(wc -l <"$WORK/switches-$server")" "$non2xx" "$sockerr"
done
