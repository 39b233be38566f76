#!/usr/bin/env bash
# Makes the folder bench/scale.sh needs to run on a bare machine (no
# packages, no compiler, no network): `BUNDLE=bench/bundle bench/scale.sh`
# there. It holds
#   bin/   lacquer (the release build, its debugging sections stripped but
#          its symbols kept), nginx, varnishd, wrk, h2load, and perf with
#          PERF=1 (for bench/scale.sh's PROFILE)
#   lib/   the shared libraries those take from packages a bare system lacks
#   certs/ key.pem and cert.pem (ECDSA P-256, CN localhost)
#   vgc.so the origin's VCL compiled ahead for this varnishd, so that it
#          starts where no C compiler is (the origin is then on port 18090)
# The libraries come from this machine, so the target needs a glibc at
# least as new as this one's. About 25 MB.
#
# Usage: [PERF=1] bench/make-bundle.sh [DIR]   (default bench/bundle, ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-bench/bundle}"
. bench/common.sh
ensure varnishd wrk nginx h2load openssl gcc -- varnish wrk nginx nghttp2-client openssl gcc
build_lacquer
rm -rf "$DIR"; mkdir -p "$DIR/bin" "$DIR/lib" "$DIR/certs"
cp "$LACQUER" "$DIR/bin/lacquer"; strip --strip-debug "$DIR/bin/lacquer"
PROGRAMS="nginx varnishd wrk h2load"
if [ "${PERF:-0}" = 1 ]; then ensure perf -- linux-perf; PROGRAMS+=" perf"; fi
for b in $PROGRAMS taskset; do cp "$(command -v "$b")" "$DIR/bin/"; done
# Every library the programs name except the C runtime's own.
for b in $PROGRAMS; do ldd "$(command -v "$b")"; done |
    awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$DIR/lib/"; done
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$DIR/certs/key.pem" -out "$DIR/certs/cert.pem" 2>/dev/null
printf 'vcl 4.1;\nbackend default { .host = "127.0.0.1"; .port = "18090"; }\n' > "$WORK/origin.vcl"
# varnishd reads the file as its own unprivileged user.
chmod a+rX "$WORK" "$WORK/origin.vcl"
varnishd -C -f "$WORK/origin.vcl" > "$WORK/vgc.c" 2>/dev/null
gcc -std=gnu99 -O2 -pthread -fpic -shared -o "$DIR/vgc.so" "$WORK/vgc.c"
du -sh "$DIR"
