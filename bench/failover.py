#!/usr/bin/env python3
"""The seed-002 scenario, driven and timed: two nginx web servers (bw1,
bw2) behind a round-robin director with health probes and 6 h of grace.
Clients load the cache throughout with pages it holds (short TTL, so they
go stale and are refreshed) and pages it never holds (fresh URLs). On a
fixed timeline one server dies, then the other, then both come back; the
script prints, second by second, what the clients got and what the
cache's backend.list says, then a verdict for each phase.

Usage: failover.py NAME ADM_COMMAND CACHE_COMMAND... (started by
bench/failover.sh, which passes the cache's command line with @PORT@,
@VCL@ and @WORK@ placeholders filled in).
"""

import http.client
import os
import subprocess
import sys
import threading
import time

WORK = os.environ["WORK"]
TIMELINE = [  # (seconds from start, event)
    (5.0, "kill bw1"),
    (11.0, "kill bw2"),
    (17.0, "start bw1 bw2"),
]
END = 24.0
CLIENTS = 4
CACHED_PAGES = 20
PROBE_FILE = "google0ccdbf1e9571f6ef.html"


def free_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Origin:
    """One nginx web server that can be killed and started again."""

    def __init__(self, name):
        self.name = name
        self.port = free_port()
        self.root = os.path.join(WORK, name)
        os.makedirs(os.path.join(self.root, "www", "page"), exist_ok=True)
        with open(os.path.join(self.root, "www", PROBE_FILE), "w") as f:
            f.write("ok\n")
        for i in range(CACHED_PAGES):
            with open(os.path.join(self.root, "www", "page", str(i)), "w") as f:
                f.write(f"page {i}\n" * 100)
        os.makedirs(os.path.join(self.root, "www", "fresh"), exist_ok=True)
        with open(os.path.join(self.root, "nginx.conf"), "w") as f:
            f.write(f"""
worker_processes 1;
master_process off;
daemon off;
pid {self.root}/nginx.pid;
error_log {self.root}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    server {{
        listen 127.0.0.1:{self.port} reuseport;
        root {self.root}/www;
        add_header X-Server {name};
        location /page/ {{ add_header X-Server {name}; add_header Cache-Control "max-age=1"; }}
        location /fresh/ {{ add_header X-Server {name}; try_files /page/0 =404; }}
    }}
}}
""")
        os.system(f"chmod -R a+rX {WORK}")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            ["taskset", "-c", "1", "nginx", "-c", f"{self.root}/nginx.conf", "-p", self.root],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/" + PROBE_FILE)
                c.getresponse().read()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"{self.name} did not start")

    def kill(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


class Stats:
    """Results per second of the run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.buckets = {}

    def add(self, second, kind, status, ms, server, age):
        with self.lock:
            b = self.buckets.setdefault(second, {})
            key = (kind, "ok" if status == 200 else str(status))
            b[key] = b.get(key, 0) + 1
            b.setdefault(("ms", kind, status == 200), []).append(ms)
            if kind == "fresh" and status == 200 and server:
                b[("from", server)] = b.get(("from", server), 0) + 1
            if kind == "cached" and status == 200:
                b["age"] = max(b.get("age", 0), age)


def client_loop(port, t0, stats, stop, ident):
    conn = None
    n = 0
    while not stop.is_set():
        n += 1
        if n % 2:
            kind, url = "cached", f"/page/{n % CACHED_PAGES}"
        else:
            kind, url = "fresh", f"/fresh/{ident}-{n}"
        start = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", url)
            r = conn.getresponse()
            r.read()
            status, server = r.status, r.getheader("X-Server", "")
            age = int(r.getheader("Age", "0") or 0)
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            status, server, age = 0, "", 0
            if conn:
                conn.close()
            conn = None
        ms = (time.monotonic() - start) * 1000
        stats.add(int(start - t0), kind, status, ms, server, age)
        time.sleep(0.005)


def health(adm):
    """bw1/bw2 health as backend.list reports it."""
    try:
        out = subprocess.run(adm + ["backend.list"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    states = []
    for line in out.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3 and words[0].split(".")[-1] in ("bw1", "bw2"):
            states.append(f"{words[0].split('.')[-1]}:{'up' if 'healthy' in line else 'down'}")
    return " ".join(sorted(states)) or "?"


def p99(values):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.99))]


def main():
    name, adm = sys.argv[1], sys.argv[2].split()
    cmd = sys.argv[3:]
    origins = {"bw1": Origin("bw1"), "bw2": Origin("bw2")}
    for o in origins.values():
        o.start()
    port = free_port()
    vcl = os.path.join(WORK, "seed002.vcl")
    with open(vcl, "w") as f:
        f.write(f"""vcl 4.1;
import directors;

backend bw1 {{
    .host = "127.0.0.1"; .port = "{origins['bw1'].port}";
    .probe = {{ .url = "/{PROBE_FILE}"; .interval = 0.5s; .timeout = 0.3s; .window = 5; .threshold = 3; }}
}}
backend bw2 {{
    .host = "127.0.0.1"; .port = "{origins['bw2'].port}";
    .probe = {{ .url = "/{PROBE_FILE}"; .interval = 0.5s; .timeout = 0.3s; .window = 5; .threshold = 3; }}
}}

sub vcl_init {{
    new default_director = directors.round_robin();
    default_director.add_backend(bw1);
    default_director.add_backend(bw2);
}}

sub vcl_recv {{
    set req.backend_hint = default_director.backend();
}}

sub vcl_backend_response {{
    set beresp.grace = 6h;
}}

sub vcl_backend_error {{
    # A server that died since its last probe: try the next one once.
    if (bereq.retries == 0) {{
        return (retry);
    }}
}}
""")
    os.system(f"chmod a+r {vcl}")
    cmd = [w.replace("@PORT@", str(port)).replace("@VCL@", vcl) for w in cmd]
    cache = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/page/0")
                c.getresponse().read()
                break
            except OSError:
                time.sleep(0.05)
        for i in range(CACHED_PAGES):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", f"/page/{i}")
            c.getresponse().read()
        run(name, adm, port, origins)
    finally:
        cache.kill()
        cache.wait()
        for o in origins.values():
            o.kill()


def run(name, adm, port, origins):
    stats = Stats()
    stop = threading.Event()
    t0 = time.monotonic()
    threads = [
        threading.Thread(target=client_loop, args=(port, t0, stats, stop, i), daemon=True)
        for i in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    events = list(TIMELINE)
    healths = {}
    marks = {}
    while (now := time.monotonic() - t0) < END:
        while events and events[0][0] <= now:
            at, what = events.pop(0)
            verb, *names = what.split()
            for n in names:
                getattr(origins[n], verb if verb == "kill" else "start")()
            marks[int(at)] = f">> {what} at {now:.1f}s"
        healths[int(now)] = health(adm)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0) % 1.0))
    stop.set()
    for t in threads:
        t.join()

    print(f"\n== {name}: two servers, round-robin with probes (0.5 s, 3 of 5), grace 6h")
    print(f"{'t':>3}  {'backend.list':<18} {'cached ok/err':>13} {'max age':>7} "
          f"{'fresh ok/503/err':>16} {'bw1/bw2':>9} {'503 p99 ms':>10} {'ok p99 ms':>9}")
    phases = {"both up": [], "bw1 dead": [], "both dead": [], "back": []}
    for s in range(int(END)):
        b = stats.buckets.get(s, {})
        if s in marks:
            print(f"     {marks[s]}")
        cached_ok = b.get(("cached", "ok"), 0)
        cached_err = sum(v for k, v in b.items() if isinstance(k, tuple) and k[0] == "cached" and k[1] != "ok")
        fresh_ok = b.get(("fresh", "ok"), 0)
        fresh_503 = b.get(("fresh", "503"), 0)
        fresh_err = sum(v for k, v in b.items()
                        if isinstance(k, tuple) and k[0] == "fresh" and k[1] not in ("ok", "503"))
        ok_ms = b.get(("ms", "fresh", True), []) + b.get(("ms", "cached", True), [])
        bad_ms = b.get(("ms", "fresh", False), [])
        print(f"{s:>3}  {healths.get(s, '?'):<18} {cached_ok:>7}/{cached_err:<5} {b.get('age', 0):>7} "
              f"{fresh_ok:>7}/{fresh_503}/{fresh_err:<4} "
              f"{b.get(('from', 'bw1'), 0):>4}/{b.get(('from', 'bw2'), 0):<4} "
              f"{p99(bad_ms):>10.1f} {p99(ok_ms):>9.1f}")
        phase = ("both up" if s < 5 else "bw1 dead" if s < 11 else "both dead" if s < 17 else "back")
        phases[phase].append(b)

    def total(bs, key):
        return sum(b.get(key, 0) for b in bs)

    def errors(bs, kind):
        return sum(v for b in bs for k, v in b.items()
                   if isinstance(k, tuple) and k[0] == kind and k[1] != "ok")

    dead1, dead2, back = phases["bw1 dead"], phases["both dead"], phases["back"]
    print("verdict:")
    print(f"  bw1 dead:  cached errors {errors(dead1, 'cached')}, fresh errors "
          f"{errors(dead1, 'fresh')}, fresh from bw1/bw2 after the first second "
          f"{total(dead1[1:], ('from', 'bw1'))}/{total(dead1[1:], ('from', 'bw2'))}")
    slow = max((p99(b.get(("ms", "fresh", False), [])) for b in dead2), default=0.0)
    print(f"  both dead: cached served {total(dead2, ('cached', 'ok'))}, cached errors "
          f"{errors(dead2, 'cached')}; fresh 503s {total(dead2, ('fresh', '503'))}, "
          f"worst per-second p99 of a 503 {slow:.1f} ms")
    if not back:
        return
    first_fresh = next((i for i, b in enumerate(back) if b.get(("fresh", "ok"), 0)), None)
    when = "never" if first_fresh is None else f"within {first_fresh + 1} s"
    print(f"  restarted: fresh pages served again {when}; in the last second fresh from "
          f"bw1/bw2 {back[-1].get(('from', 'bw1'), 0)}/{back[-1].get(('from', 'bw2'), 0)}")


if __name__ == "__main__":
    main()
