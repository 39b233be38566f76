#!/usr/bin/env bash
# The seed-002 scenario (bench/failover.py): two web servers behind a
# round-robin director with probes and grace; one dies (traffic moves to
# the other without errors), both die (cached pages still served from
# grace, uncached ones answered 503 at once), both return (probes bring
# them back). Runs it through Lacquer, then through varnishd, each on CPU 0
# with the web servers and clients on CPU 1, and prints each timeline and
# verdict.
#
# Usage: bench/failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
ensure varnishd nginx -- varnish nginx
build_lacquer
export WORK

python3 bench/failover.py lacquer "$LACQUER adm -n $WORK/l" \
    taskset -c 0 "$LACQUER" serve -j none -F -a 127.0.0.1:@PORT@ -f @VCL@ -n "$WORK/l" -p workers=1
python3 bench/failover.py varnishd "varnishadm -n $WORK/v" \
    taskset -c 0 varnishd -F -a 127.0.0.1:@PORT@ -f @VCL@ -n "$WORK/v" -s malloc,64m
