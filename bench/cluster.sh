#!/usr/bin/env bash
# Three Lacquer nodes in a cluster on loopback against the cluster's bar
# (bench/cluster.py): the origin asked once per object for the whole
# cluster, a purge on every node with its p99 from request to the last
# node, the CPU of a fetch through the owner against a hit on it, and a
# node killed. The nodes share this machine's cores with each other and
# the client: the CPU figures are per request, not per core.
#
# Usage: bench/cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh
build_lacquer
cd bench
python3 cluster.py "$LACQUER" "$WORK"
