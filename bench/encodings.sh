#!/bin/bash
# br and zstd against gzip, in one run:
#
# 1. Hits in each coding: a 64 KiB text page stored gzip'd (do_gzip, as
#    Varnish users store it), its br and zstd renditions made; Lacquer on
#    CPU 0, wrk on CPU 1 asking in turn with `Accept-Encoding: gzip`, `br`
#    and `zstd`, round after round; varnishd's gzip hit of the same page
#    beside them. Prints CPU microseconds per request and each coding's
#    ratio to Lacquer's gzip hit.
# 2. Compression CPU per byte: Lacquer makes the br and zstd renditions of
#    N copies of a 1 MiB text corpus (the project's own sources), CPU time
#    read off its process; the reference tools (`brotli -q LEVEL`, `zstd
#    -LEVEL`) compress the same bytes as often. Prints nanoseconds per
#    input byte, the output sizes and the ratios.
# 3. A 1 GiB br and zstd bomb from the origin, delivered decoded to a
#    client that takes neither: how far Lacquer's peak memory rises.
#
# Usage: bench/encodings.sh [SECONDS] [ROUNDS] [COPIES]   (default 5 3 40)
#   PARTS=13 runs parts 1 and 3 only (default: 123).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
SECS=${1:-5}; ROUNDS=${2:-3}; COPIES=${3:-40}; PARTS=${PARTS:-123}
ensure varnishd wrk nginx taskset brotli zstd -- varnish wrk nginx util-linux brotli zstd
build_lacquer

# The origin: a 64 KiB page, the corpus, and the bombs sent as the
# codings they are.
mkdir -p "$WORK/www/c"
python3 - "$WORK/www/page.html" <<'PY'
import sys
words = "the cache serves pages from memory and protects the backends while".split()
out, i = [], 0
while sum(map(len, out)) < 65536:
    out.append(words[(i * 7 + i // 5) % len(words)] + (" " if i % 13 else "\n<p>"))
    i += 1
open(sys.argv[1], "w").write("<!doctype html>" + "".join(out)[:65536])
PY
{ find crates -name '*.rs' | sort | xargs cat | head -c 1048576 > "$WORK/corpus.txt"; } 2>/dev/null || true
for i in $(seq 1 "$COPIES"); do ln "$WORK/corpus.txt" "$WORK/www/c/$i.txt"; done
head -c 1073741824 /dev/zero | brotli -q 5 -c > "$WORK/www/bomb.br"
head -c 1073741824 /dev/zero | zstd -3 -q -c > "$WORK/www/bomb.zst"
start_nginx_origin 'location / { add_header Cache-Control "max-age=3600"; }
        location ~ \.br$ { default_type text/plain; add_header Content-Encoding br; }
        location ~ \.zst$ { default_type text/plain; add_header Content-Encoding zstd; }'
wait_up "$ORIGIN_PORT"

cat > "$WORK/gzip.vcl" <<VCL
vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "$ORIGIN_PORT"; }
sub vcl_backend_response { if (bereq.url ~ "\.html\$") { set beresp.do_gzip = true; } }
VCL
LQ_PORT=$(free_port); VA_PORT=$(free_port)
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$LQ_PORT" -f "$WORK/gzip.vcl" \
    -n "$WORK/lacquer" -s malloc,1g -p workers=1 >"$WORK/lacquer.out" 2>&1 & LQ_PID=$!; PIDS+=($LQ_PID)
taskset -c 0 varnishd -F -j none -a "127.0.0.1:$VA_PORT" -f "$WORK/gzip.vcl" \
    -n "$WORK/varnish" -s malloc,256m >"$WORK/varnish.out" 2>&1 & VA_PID=$!; PIDS+=($VA_PID)
wait_up "$LQ_PORT"; wait_up "$VA_PORT"

counter() { "$LACQUER" stat -n "$WORK/lacquer" -1 -f "MAIN.$1" | awk '{print $2}'; }
# until_rendition URL CODING: asks until the answer comes in CODING.
until_rendition() {
    for _ in $(seq 1 600); do
        curl -s -o /dev/null -D - -H "Accept-Encoding: $2" "http://127.0.0.1:$LQ_PORT$1" |
            grep -qi "^content-encoding: $2" && return 0
        sleep 0.05
    done
    echo "no $2 rendition of $1" >&2; exit 1
}

if [[ $PARTS == *1* ]]; then
echo "== 1. hits: CPU per request (Lacquer and varnishd on CPU 0, wrk on CPU 1)"
curl -s -o /dev/null -H "Accept-Encoding: gzip" "http://127.0.0.1:$VA_PORT/page.html"
until_rendition /page.html br; until_rendition /page.html zstd
declare -A SUM
for round in $(seq 1 "$ROUNDS"); do
    for c in gzip br zstd varnishd-gzip; do
        port=$LQ_PORT; pid=$LQ_PID; ae=$c
        [ "$c" = varnishd-gzip ] && { port=$VA_PORT; pid=$VA_PID; ae=gzip; }
        url="http://127.0.0.1:$port/page.html"
        taskset -c 1 wrk -t1 -c50 -d1s -H "Accept-Encoding: $ae" "$url" >/dev/null
        t0=$(ticks "$pid")
        out=$(taskset -c 1 wrk -t1 -c50 -d"${SECS}s" -H "Accept-Encoding: $ae" "$url")
        t1=$(ticks "$pid")
        reqs=$(echo "$out" | awk '/requests in/ {print $1}')
        us=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v r="$reqs" 'BEGIN { printf "%.2f", t / hz * 1e6 / r }')
        SUM[$c]=$(awk -v s="${SUM[$c]:-0}" -v x="$us" 'BEGIN { print s + x }')
        printf '  round %d %-14s %8s us/req %9d requests\n' "$round" "$c" "$us" "$reqs"
    done
done
for c in br zstd varnishd-gzip; do
    awk -v n="$c" -v a="${SUM[gzip]}" -v b="${SUM[$c]}" \
        'BEGIN { printf "  %-14s / Lacquer gzip hit: %.3f\n", n, b / a }'
done

fi

if [[ $PARTS == *2* ]]; then
echo "== 2. compression: CPU per input byte against the reference tools"
BR_LEVEL=$("$LACQUER" adm -n "$WORK/lacquer" param.show brotli_level | awk '/Value is/ {print $3}')
ZSTD_LEVEL=$("$LACQUER" adm -n "$WORK/lacquer" param.show zstd_level | awk '/Value is/ {print $3}')
SIZE=$(stat -c %s "$WORK/corpus.txt")
for i in $(seq 1 "$COPIES"); do curl -s -o /dev/null "http://127.0.0.1:$LQ_PORT/c/$i.txt"; done
for c in br zstd; do
    made=$(counter "n_$([ $c = br ] && echo brotli || echo zstd)")
    t0=$(ticks "$LQ_PID")
    for i in $(seq 1 "$COPIES"); do curl -s -o /dev/null -H "Accept-Encoding: $c" "http://127.0.0.1:$LQ_PORT/c/$i.txt"; done
    for _ in $(seq 1 1200); do
        now=$(counter "n_$([ $c = br ] && echo brotli || echo zstd)")
        [ "$((now - made))" -ge "$COPIES" ] && break
        # A request that found every job busy made none: ask again.
        for i in $(seq 1 "$COPIES"); do curl -s -o /dev/null -H "Accept-Encoding: $c" "http://127.0.0.1:$LQ_PORT/c/$i.txt"; done
        sleep 0.1
    done
    t1=$(ticks "$LQ_PID")
    ours=$(curl -s -H "Accept-Encoding: $c" "http://127.0.0.1:$LQ_PORT/c/1.txt" | wc -c)
    if [ "$c" = br ]; then tool=(brotli -q "$BR_LEVEL" -c); else tool=(zstd "-$ZSTD_LEVEL" -q -c); fi
    theirs=$("${tool[@]}" < "$WORK/corpus.txt" | wc -c)
    # The tool's CPU time (user + system), on CPU 0 as Lacquer was.
    tt=$(python3 - "$COPIES" "$WORK/corpus.txt" "${tool[@]}" <<'PY'
import resource, subprocess, sys
n, path, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
for _ in range(n):
    with open(path, "rb") as f:
        subprocess.run(["taskset", "-c", "0"] + cmd, stdin=f, stdout=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(r.ru_utime, r.ru_stime)
PY
)
    awk -v c="$c" -v t=$((t1 - t0)) -v hz="$HZ" -v n="$COPIES" -v s="$SIZE" -v tt="$tt" -v o="$ours" -v r="$theirs" 'BEGIN {
        split(tt, u, " "); ref = (u[1] + u[2]) * 1e9 / (n * s); us = t / hz * 1e9 / (n * s)
        printf "  %-4s Lacquer %.2f ns/byte, reference %.2f ns/byte: %.3f; output %d against %d bytes: %.4f\n", c, us, ref, us / ref, o, r, o / r }'
done

fi

if [[ $PARTS == *3* ]]; then
echo "== 3. a 1 GiB bomb from the origin, delivered decoded"
for f in bomb.br bomb.zst; do
    before=$(awk '/VmHWM/ {print $2}' "/proc/$LQ_PID/status")
    n=$(curl -s -H "Accept-Encoding: gzip" "http://127.0.0.1:$LQ_PORT/$f" | wc -c)
    after=$(awk '/VmHWM/ {print $2}' "/proc/$LQ_PID/status")
    printf '  %-9s %5d KiB compressed, %d bytes delivered, peak memory +%d KiB\n' \
        "$f" "$(( $(stat -c %s "$WORK/www/$f") / 1024 ))" "$n" "$((after - before))"
done
fi
