#!/usr/bin/env bash
# Socket pacing (vmod tcp, seed 001): a cached 20 MiB object downloaded
# with `tcp.set_socket_pace(RATE)` should take 20 MiB / RATE, while
# unpaced downloads of the same object alongside it go at full speed.
# Runs Lacquer and varnishd (with varnish-modules' vmod tcp) one after the
# other, each pinned to CPU 0 with the clients (curl) on CPU 1, and prints
# for each: the paced time against the expected one, and the mean unpaced
# download time alone and while the paced download runs, with the ratios.
#
# Usage: bench/pacing.sh [rate KB/s] [unpaced downloads]   (default 10000 10)
set -euo pipefail
cd "$(dirname "$0")/.."
RATE="${1:-10000}"
UNPACED="${2:-10}"

. bench/common.sh
ensure varnishd nginx curl -- varnish nginx curl
dpkg -s varnish-modules >/dev/null 2>&1 || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq varnish-modules >/dev/null
}
build_lacquer
start_origin
head -c $((20 * 1024 * 1024)) /dev/urandom > "$WORK/www/20m"
chmod a+r "$WORK/www/20m"

cat > "$WORK/pacing.vcl" <<VCL
vcl 4.1;
import tcp;
backend origin { .host = "127.0.0.1"; .port = "$ORIGIN_PORT"; }
sub vcl_recv {
    if (req.url ~ "[?]paced$") {
        tcp.set_socket_pace($RATE);
        set req.url = regsub(req.url, "[?]paced$", "");
    }
}
VCL
chmod -R a+rX "$WORK"

# seconds URL: one download's time, on CPU 1.
seconds() { taskset -c 1 curl -fso /dev/null -w '%{time_total}' "$1"; }
# mean_ms PORT: the mean time of UNPACED unpaced downloads, one at a time.
mean_ms() {
    local sum=0 t
    for _ in $(seq 1 "$UNPACED"); do
        t=$(seconds "http://127.0.0.1:$1/20m")
        sum=$(awk -v s="$sum" -v t="$t" 'BEGIN { print s + t }')
    done
    awk -v s="$sum" -v n="$UNPACED" 'BEGIN { printf "%.1f", s / n * 1000 }'
}

# measure NAME PORT: sets NAME_paced, NAME_alone, NAME_during.
measure() {
    local name=$1 port=$2
    wait_up "$port"
    curl -fso /dev/null "http://127.0.0.1:$port/20m"      # cache it
    local alone paced during
    alone=$(mean_ms "$port")
    paced=$(seconds "http://127.0.0.1:$port/20m?paced")
    # Unpaced downloads while a paced one is under way.
    seconds "http://127.0.0.1:$port/20m?paced" > "$WORK/$name.bg" & local bg=$!
    during=$(mean_ms "$port")
    wait "$bg"
    printf -v "${name}_alone" '%s' "$alone"
    printf -v "${name}_paced" '%s' "$paced"
    printf -v "${name}_during" '%s' "$during"
}

L_PORT=$(free_port)
taskset -c 0 "$LACQUER" serve -j none -a "127.0.0.1:$L_PORT" -f "$WORK/pacing.vcl" -n "$WORK/l" \
    -s malloc,256m -p workers=1 >"$WORK/l.out" 2>&1 & L_PID=$!; PIDS+=($L_PID)
measure lacquer "$L_PORT"
kill "$L_PID"

V_PORT=$(free_port)
taskset -c 0 varnishd -F -a "127.0.0.1:$V_PORT" -f "$WORK/pacing.vcl" -n "$WORK/v" \
    -s malloc,256m >"$WORK/v.out" 2>&1 & PIDS+=($!)
measure varnishd "$V_PORT"

expected=$(awk -v r="$RATE" 'BEGIN { printf "%.2f", 20 * 1024 / r }')
echo "20 MiB cached object, paced at $RATE KB/s: expected ${expected} s"
printf '%-34s %10s %10s\n' "" lacquer varnishd
printf '%-34s %10.2f %10.2f\n' "paced download (s)" "$lacquer_paced" "$varnishd_paced"
printf '%-34s %10.2f %10.2f\n' "  paced / expected" \
    "$(awk -v a="$lacquer_paced" -v e="$expected" 'BEGIN { print a / e }')" \
    "$(awk -v a="$varnishd_paced" -v e="$expected" 'BEGIN { print a / e }')"
printf '%-34s %10s %10s\n' "unpaced download alone (ms)" "$lacquer_alone" "$varnishd_alone"
printf '%-34s %10s %10s\n' "unpaced during a paced one (ms)" "$lacquer_during" "$varnishd_during"
printf '%-34s %10.2f %10.2f\n' "  during / alone" \
    "$(awk -v a="$lacquer_during" -v b="$lacquer_alone" 'BEGIN { print a / b }')" \
    "$(awk -v a="$varnishd_during" -v b="$varnishd_alone" 'BEGIN { print a / b }')"
awk -v l="$lacquer_alone" -v v="$varnishd_alone" \
    'BEGIN { printf "unpaced download time, varnishd / lacquer: %.2f\n", v / l }'
