#!/bin/bash
# What Lacquer's own steps cost beyond the runtime they run on: CPU per
# request of Lacquer, of bare servers giving the same response
# (bench/bare: tokio alone, an epoll loop alone) and of the nginx
# ceiling, side by side through bench/ab.sh (one server at a time on
# CPU 0, wrk on CPU 1), for keep-alive (a) and one request per
# connection (b). Ends with each server's mean.
#
# Usage: bench/bare.sh [SECONDS] [ROUNDS]    (default 5 3)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
SECS=${1:-5}; ROUNDS=${2:-3}
build_lacquer
cargo build --release --quiet --manifest-path bench/bare/Cargo.toml
BARE="$PWD/bench/bare/target/release/lacquer-bare"
for mode in tokio mio; do
    printf '#!/bin/sh\nBARE_MODE=%s exec "%s" "$@"\n' "$mode" "$BARE" > "$WORK/bare-$mode"
    chmod +x "$WORK/bare-$mode"
done
for case in a b; do
    bench/ab.sh "$case" "$SECS" "$ROUNDS" "$LACQUER" "$WORK/bare-tokio" "$WORK/bare-mio" nginx
done | awk '{ print; key = $1 " " $2; sum[key] += $3; n[key]++ }
    END { for (k in sum) printf "mean %-50s %8.2f us/req\n", k, sum[k] / n[k] }'
