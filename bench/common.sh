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

# ensure CMD... -- PACKAGE...: installs the packages unless every command
# is already on the PATH.
ensure() {
    local cmds=() missing=0
    while [ "$1" != "--" ]; do cmds+=("$1"); shift; done; shift
    for c in "${cmds[@]}"; do command -v "$c" >/dev/null 2>&1 || missing=1; done
    if [ "$missing" = 1 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    fi
}

# Builds the release binary as it is shipped, profile-guided
# (scripts/build-release, which rebuilds only when the sources changed);
# LACQUER is its path. LACQUER_PGO=0 takes the plain release build; a
# LACQUER already set (another build to compare) is taken as it is.
build_lacquer() {
    if [ -n "${LACQUER:-}" ]; then
        [ -x "$LACQUER" ] || { echo "LACQUER=$LACQUER is not a program" >&2; exit 1; }
    elif [ "${LACQUER_PGO:-1}" = 0 ]; then
        cargo build --release --quiet -p lacquer
        LACQUER="$PWD/target/release/lacquer"
    else
        LACQUER="$PWD/$(scripts/build-release)"
    fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do curl -fso /dev/null "http://127.0.0.1:$1/1k" && return 0; sleep 0.1; done; echo "port $1 did not come up" >&2; exit 1; }

# nginx on CPU 0 answering every request with 1 KiB from memory
# (`return 200`), on port $1: the ceiling a cache hit is measured against.
# With $2 = deferred, its listener defers accepts until data comes (as
# Lacquer's `accept_filter` does). CEIL_PID is its master process.
start_ceiling() {
    local one_k
    one_k=$(head -c 1024 /dev/zero | tr '\0' 'a')
    cat > "$WORK/ceiling-$1.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx-ceiling-$1.pid;
error_log $WORK/nginx-ceiling-$1.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$1${2:+ $2};
        location / { default_type text/plain; return 200 "$one_k"; }
    }
}
CONF
    taskset -c 0 nginx -c "$WORK/ceiling-$1.conf" -p "$WORK" & CEIL_PID=$!
    PIDS+=("$CEIL_PID")
}

# nginx on CPU 1 serving $WORK/www/1k with a long max-age, on ORIGIN_PORT.
start_origin() {
    start_nginx_origin 'location / { add_header Cache-Control "max-age=3600"; }'
    wait_up "$ORIGIN_PORT"
}

# nginx on CPU 1 on ORIGIN_PORT, serving $WORK/www (a 1 KiB file `1k`
# among what the caller puts there) by the location block $1; with
# ORIGIN_LISTEN set, that is added to its listen directive (`http2`).
start_nginx_origin() {
    ORIGIN_PORT=$(free_port)
    mkdir -p "$WORK/www"
    head -c 1024 /dev/zero | tr '\0' 'a' > "$WORK/www/1k"
    chmod -R a+rX "$WORK"
    cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT${ORIGIN_LISTEN:+ $ORIGIN_LISTEN};
        root $WORK/www;
        $1
    }
}
CONF
    taskset -c 1 nginx -c "$WORK/nginx.conf" -p "$WORK" & PIDS+=($!)
}

# compare_pair SECONDS ROUNDS A_PID A_PORT E_PID E_PORT LABEL_A LABEL_E
# with the arrays A_HEADERS and E_HEADERS holding each side's wrk -H
# options: both instances loaded at once by their own wrk on CPU 1,
# CPU time per request measured with perf, each round and the mean
# ratio E/A printed.
compare_pair() {
    local duration=$1 rounds=$2 a_pid=$3 a_port=$4 e_pid=$5 e_port=$6 la=$7 le=$8
    per_request() { awk -F, -v n="$2" '/task-clock/ { printf "%.3f", $1 * 1000 / n }' "$1"; }
    printf '%-6s %14s %14s %8s\n' round "$la cpu-us/req" "$le cpu-us/req" "$le/$la"
    local sum_a=0 sum_e=0
    for r in $(seq 1 "$rounds"); do
        perf stat -x, -e task-clock -p "$a_pid" -o "$WORK/a.stat" -- sleep "$duration" >/dev/null 2>&1 & local sa=$!
        perf stat -x, -e task-clock -p "$e_pid" -o "$WORK/e.stat" -- sleep "$duration" >/dev/null 2>&1 & local se=$!
        taskset -c 1 wrk -t1 -c50 -d"${duration}s" "${A_HEADERS[@]}" "http://127.0.0.1:$a_port/1k" > "$WORK/a.wrk" & local wa=$!
        taskset -c 1 wrk -t1 -c50 -d"${duration}s" "${E_HEADERS[@]}" "http://127.0.0.1:$e_port/1k" > "$WORK/e.wrk"
        wait "$wa" "$sa" "$se"
        local na ne a e
        na=$(awk '/requests in/ {print $1}' "$WORK/a.wrk"); ne=$(awk '/requests in/ {print $1}' "$WORK/e.wrk")
        a=$(per_request "$WORK/a.stat" "$na"); e=$(per_request "$WORK/e.stat" "$ne")
        printf '%-6s %14s %14s %8s\n' "$r" "$a" "$e" "$(awk -v a="$a" -v e="$e" 'BEGIN { printf "%.3f", e / a }')"
        sum_a=$(awk -v s="$sum_a" -v x="$a" 'BEGIN { print s + x }'); sum_e=$(awk -v s="$sum_e" -v x="$e" 'BEGIN { print s + x }')
    done
    PAIR_RATIO=$(awk -v a="$sum_a" -v e="$sum_e" 'BEGIN { printf "%.3f", e / a }')
}

# CPU ticks (user+sys) of the given processes and their children, and the
# ticks in a second.
ticks() {
    local total=0 pid
    for pid in $(for p in "$@"; do echo "$p"; pgrep -P "$p" || true; done); do
        [ -r "/proc/$pid/stat" ] && total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}
HZ=$(getconf CLK_TCK)
