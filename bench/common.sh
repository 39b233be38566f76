# Shared by the benchmark scripts (sourced, not run): the work directory
# and the processes to stop on exit, free ports, and waiting for a server.
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$1/1k" && return 0; sleep 0.1; done; echo "port $1 did not come up" >&2; exit 1; }
