"""Three Lacquer nodes in a cluster on loopback, in front of one origin,
measured against the cluster's bar (bench/cluster.sh runs it):

1. fetch once: 1000 URLs, each asked once at every node; how many times
   the origin was asked for each;
2. invalidation: 1000 PURGEs sent one after another, each to the next
   node in turn; the time from the request to its answer, which comes
   once every node has applied it (the answer says how many did);
3. peer fetch cost: CPU time of the cluster per request when a node
   asks the owner for an object (a miss here, a hit there), against a
   hit on the owner itself;
4. a hit on a node of the cluster against the same hits on a node
   outside any cluster;
5. a node killed: how long until the others stop routing to it, and the
   requests that failed meanwhile.

Usage: python3 bench/cluster.py LACQUER WORKDIR"""

import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

from procstat import cpu_seconds

LACQUER, WORK = sys.argv[1], sys.argv[2]
SECRET = os.path.join(WORK, "secret")
N_URLS = 1000


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    asked = {}
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_GET(self):
        with Origin.lock:
            Origin.asked[self.path] = Origin.asked.get(self.path, 0) + 1
        body = b"x" * 1024
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600")
        self.end_headers()
        self.wfile.write(body)


def start_origin():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


class Node:
    def __init__(self, name, origin_port, seed=None, alone=False):
        self.name = name
        self.work = os.path.join(WORK, name)
        vcl = os.path.join(WORK, "purge.vcl")
        args = [LACQUER, "serve", "-j", "none", "-F", "-a", "127.0.0.1:0", "-f", vcl,
                "-n", self.work, "-i", name, "-p", "workers=1"]
        if not alone:
            args += ["--cluster-bind", "127.0.0.1:0", "--cluster-secret", SECRET]
        if seed:
            args += ["--cluster-join", seed]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in self.proc.stdout:
            if line.startswith("Listen "):
                parts = line.split()
                self.port = int(parts[3])
            if line.strip() == "Child launched OK":
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def adm(self, *cmd):
        return subprocess.run([LACQUER, "adm", "-n", self.work, *cmd],
                              capture_output=True, text=True, timeout=30).stdout

    def view(self):
        out = self.adm("cluster.list", "-j")
        start = out.index("[")
        return json.loads(out[start:])[3:]

    def cluster_addr(self):
        return next(n["cluster"] for n in self.view() if n["self"])

    def states(self):
        return sorted(n["state"] for n in self.view())

    def request(self, method, url, who=False):
        headers = {"Host": "site.test"}  # one site, whichever node is asked
        if who:
            headers["x-who"] = "1"
        for attempt in range(2):
            try:
                self.conn.request(method, url, headers=headers)
                r = self.conn.getresponse()
                r.read()
                return r
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                if attempt:
                    raise

    def cpu(self):
        return cpu_seconds([self.proc.pid])


def wait(what, cond, limit=20):
    end = time.time() + limit
    while not cond():
        if time.time() > end:
            sys.exit(f"{what}: not within {limit} s")
        time.sleep(0.05)


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p / 100))]


def main():
    with open(SECRET, "w") as f:
        f.write("bench secret\n")
    origin = start_origin()
    with open(os.path.join(WORK, "purge.vcl"), "w") as f:
        f.write('vcl 4.1;\nimport cluster;\n'
                f'backend default {{ .host = "127.0.0.1"; .port = "{origin}"; }}\n'
                'sub vcl_recv { if (req.method == "PURGE") { return (purge); } }\n'
                'sub vcl_deliver { set resp.http.x-owner = cluster.owner(); }\n'
                # Who owns a URL, asked without fetching it.
                'sub vcl_miss { if (req.http.x-who) { return (synth(200)); } }\n'
                'sub vcl_synth { set resp.http.x-owner = cluster.owner(); }\n')
    a = Node("a", origin)
    seed = a.cluster_addr()
    b, c = Node("b", origin, seed), Node("c", origin, seed)
    nodes = [a, b, c]
    wait("three nodes alive", lambda: all(n.states() == ["alive"] * 3 for n in nodes))

    # 1. Fetch once per cluster.
    for i in range(N_URLS):
        for n in nodes:
            assert n.request("GET", f"/o/{i}").status == 200
    counts = [Origin.asked.get(f"/o/{i}", 0) for i in range(N_URLS)]
    once = sum(1 for k in counts if k == 1)
    print(f"fetch once: {N_URLS} URLs asked at 3 nodes each; the origin was asked once "
          f"for {once} of them, at most {max(counts)} times for any (bar: every URL once)")

    # 2. Purges, each answered once every node applied it.
    times, reached = [], 0
    for i in range(N_URLS):
        n = nodes[i % 3]
        t0 = time.perf_counter()
        r = n.request("PURGE", f"/o/{i}")
        times.append((time.perf_counter() - t0) * 1000)
        reached += r.getheader("lacquer-invalidated") == "3/3"
    times.sort()
    print(f"purge: {N_URLS} purges, {reached} applied on 3/3 nodes; request to the last node "
          f"applying it p50 {percentile(times, 50):.2f} ms, p99 {percentile(times, 99):.2f} ms, "
          f"max {times[-1]:.2f} ms (bar: p99 <= 50 ms, 3/3)")

    # 3. A peer fetch against a hit on the owner. Objects the owner has:
    # each asked at the owner first (its fetch from the origin), none
    # yet at the others.
    owned = {}
    for i in range(8000):
        url = f"/w/{i}"
        owner = a.request("GET", url, who=True).getheader("x-owner")
        owned.setdefault(owner, []).append(url)
    owner = max(owned, key=lambda k: len(owned[k]))
    o = next(n for n in nodes if n.name == owner)
    x = next(n for n in nodes if n.name != owner)
    urls = owned[owner]
    for url in urls:
        o.request("GET", url)
    # Hits on the owner.
    before = o.cpu()
    for _ in range(10):
        for url in urls:
            o.request("GET", url)
    hit = (o.cpu() - before) / (10 * len(urls))
    # Misses at another node, each answered by the owner's hit: five
    # rounds, the asking node keeping no copy (cluster_copy_ttl=0), so
    # that each round asks the owner again and the CPU clock (ticks of
    # 10 ms) counts enough of them.
    x.adm("param.set", "cluster_copy_ttl", "0")
    rounds = 5
    before_o, before_x = o.cpu(), x.cpu()
    for _ in range(rounds):
        for url in urls:
            x.request("GET", url)
    at_owner = (o.cpu() - before_o) / (rounds * len(urls))
    at_asker = (x.cpu() - before_x) / (rounds * len(urls))
    print(f"peer fetch: {len(urls)} objects of {owner}'s asked {rounds} times at {x.name}: the owner spent "
          f"{at_owner * 1e6:.1f} us a request answering its peer, against {hit * 1e6:.1f} us "
          f"for a client's hit: {at_owner / hit:.2f}x (bar: <= 1.5x); the asking node "
          f"{at_asker * 1e6:.1f} us (its miss: fetch, store, deliver), both together "
          f"{(at_owner + at_asker) / hit:.2f}x a hit")

    # 4. The same hits on a node outside any cluster (with the same
    # program): clustering must not make a hit dearer.
    lone = Node("lone", origin, alone=True)
    for url in urls:
        lone.request("GET", url)
    before = lone.cpu()
    for _ in range(10):
        for url in urls:
            lone.request("GET", url)
    alone_hit = (lone.cpu() - before) / (10 * len(urls))
    lone.proc.terminate()
    print(f"hit: {hit * 1e6:.1f} us on a node of the cluster, {alone_hit * 1e6:.1f} us on a node "
          f"alone: {hit / alone_hit:.2f}x (bar: as fast)")

    # 5. A node killed: requests to the others go on; how long until it is
    # out of routing.
    c.proc.send_signal(signal.SIGKILL)
    c.proc.wait()
    killed, failed, asked, i = time.time(), 0, 0, 0
    while not all(n.states().count("down") == 1 for n in (a, b)):
        for n in (a, b):
            asked += 1
            try:
                failed += n.request("GET", f"/k/{i}").status != 200
            except OSError:
                failed += 1
        i += 1
        if time.time() - killed > 30:
            sys.exit("the killed node was still routed to after 30 s")
    print(f"kill -9: out of routing after {time.time() - killed:.2f} s; "
          f"{failed} of {asked} requests to the other nodes failed meanwhile (bar: 5 s, none)")
    for n in (a, b):
        n.proc.terminate()


main()
