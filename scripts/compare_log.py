"""The log comparison behind scripts/compare-log: an origin, varnishd and
Lacquer with one program, a corpus of request kinds sent to both, and the
records of each kind's last request compared once normalised."""

import gzip
import http.server
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

VCL = r"""vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "%(origin)d"; }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) { return (synth(405, "Not allowed")); }
        return (purge);
    }
    if (req.method == "BAN") {
        ban("obj.http.X-Url ~ " + req.url);
        return (synth(200, "Banned"));
    }
    if (req.url ~ "^/pipe") { return (pipe); }
    if (req.url ~ "^/pass") { return (pass); }
    if (req.url ~ "^/synth") { return (synth(403, "Forbidden")); }
    if (req.url ~ "^/static") { unset req.http.Cookie; }
    if (req.http.Accept-Encoding) {
        if (req.http.Accept-Encoding ~ "gzip") {
            set req.http.Accept-Encoding = "gzip";
        } else {
            unset req.http.Accept-Encoding;
        }
    }
    if (req.restarts > 0) { set req.http.X-Restarted = "yes"; }
    set req.http.X-Recv = "seen";
}
sub vcl_hash {
    if (req.http.X-Lang) { hash_data(req.http.X-Lang); }
}
sub vcl_backend_fetch {
    if (bereq.url ~ "^/bf") { set bereq.http.X-Fetch = "1"; unset bereq.http.X-Recv; }
}
sub vcl_backend_response {
    set beresp.http.X-Url = bereq.url;
    if (bereq.url ~ "^/esi") { set beresp.do_esi = true; }
    if (bereq.url ~ "^/dogz") { set beresp.do_gzip = true; }
    if (beresp.status == 503 && bereq.url ~ "^/retry" && bereq.retries < 1) {
        return (retry);
    }
    if (bereq.url ~ "^/hfm") { set beresp.uncacheable = true; set beresp.ttl = 10s; }
    if (bereq.url ~ "^/hfp") { return (pass(10s)); }
    if (bereq.url ~ "^/short") { set beresp.ttl = 0.2s; set beresp.grace = 60s; }
    if (bereq.url ~ "^/berr") { return (error(502, "Made up")); }
    unset beresp.http.X-Powered-By;
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
    unset resp.http.X-Url;
    if (resp.status == 404 && req.url ~ "^/restart" && req.restarts == 0) { return (restart); }
}
sub vcl_synth { set resp.http.X-Synth = "yes"; }
sub vcl_backend_error { set beresp.http.X-Error = "yes"; }
"""

ESI_PAGE = b'<html>a<esi:include src="/static/frag"/>b</html>\n'


class Origin(http.server.BaseHTTPRequestHandler):
    """What the corpus asks of a backend, by path."""

    protocol_version = "HTTP/1.1"
    retries = {}

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if self.command == "HEAD" or status in (204, 304):
            self.send_header("Content-Length", str(len(body)) if status != 304 else "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self.reply(200, b"posted\n", [("Content-Type", "text/plain")])

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = self.path.split("?")[0]
        text = [("Content-Type", "text/plain"), ("Cache-Control", "max-age=60")]
        body = b"body of " + path.encode() + b"\n" * 40
        if path.startswith("/e404") or path.startswith("/restart"):
            return self.reply(404, b"nope\n", text)
        if path.startswith("/e500"):
            return self.reply(500, b"broken\n", text)
        if path.startswith("/retry"):
            n = Origin.retries.get(self.path, 0)
            Origin.retries[self.path] = n + 1
            if n % 2 == 0:
                return self.reply(503, b"busy\n", text)
            return self.reply(200, body, text)
        if path.startswith("/nostore"):
            return self.reply(200, body, [("Content-Type", "text/plain"), ("Cache-Control", "no-store")])
        if path.startswith("/cookie"):
            return self.reply(200, body, text + [("Set-Cookie", "a=b")])
        if path.startswith("/vary"):
            return self.reply(200, body, text + [("Vary", "Accept-Language")])
        if path.startswith("/etag"):
            if self.headers.get("If-None-Match") == '"v1"':
                return self.reply(304, b"", [("ETag", '"v1"'), ("Cache-Control", "max-age=60")])
            return self.reply(200, body, text + [("ETag", '"v1"')])
        if path.startswith("/pregz"):
            return self.reply(200, gzip.compress(body), text + [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")])
        if path.startswith("/esi"):
            return self.reply(200, ESI_PAGE, [("Content-Type", "text/html"), ("Cache-Control", "max-age=60")])
        if path.startswith("/redirect"):
            return self.reply(301, b"", [("Location", "/static/x"), ("Cache-Control", "max-age=60")])
        if path.startswith("/big"):
            return self.reply(200, b"x" * 65536, text)
        if path.startswith("/powered"):
            return self.reply(200, body, text + [("X-Powered-By", "origin")])
        return self.reply(200, body, text)


def free_port():
    """A port free now, below the kernel's range for outgoing connections:
    a port from that range (what binding port 0 gives) can be taken by a
    connection some other program opens before varnishd binds it (it
    then exits 255)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    # Where that range starts too low to choose below it, any port.
    lo, hi = (max(1024, low - 12000), low) if low > 2048 else (1024, 65536)
    while True:
        port = random.randrange(lo, hi)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()


def send(port, raw, h2_url=None):
    """Sends one request on its own connection and reads to the end."""
    if h2_url:
        subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", "http://127.0.0.1:%d%s" % (port, h2_url)],
            check=False,
        )
        return
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(raw)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()


def req(method, url, *headers, body=b""):
    lines = ["%s %s HTTP/1.1" % (method, url), "Host: localhost", "Connection: close"]
    lines += list(headers)
    if body:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def corpus():
    """Each kind: its name and its requests; the last one is compared,
    the ones before it set the cache up."""
    g = lambda u, *h: req("GET", u, *h)
    k = []
    add = lambda name, *reqs: k.append((name, list(reqs)))
    add("miss", g("/static/miss"))
    add("hit", g("/static/hit"), g("/static/hit"))
    add("hit with cookie removed", g("/static/ck"), g("/static/ck", "Cookie: a=b"))
    add("pass by url", g("/pass/a"))
    add("pass by cookie (builtin)", g("/c/cookie", "Cookie: a=b"))
    add("pass POST (builtin)", req("POST", "/c/post", body=b"abc"))
    add("pipe", g("/pipe/a"))
    add("pipe by method (builtin)", req("FOO", "/c/foo"))
    add("synth from recv", g("/synth/a"))
    add("synth 405 for PRI (builtin)", req("PRI", "/c/pri"))
    add("purge", g("/static/purged"), req("PURGE", "/static/purged"))
    add("miss after purge", g("/static/p2"), req("PURGE", "/static/p2"), g("/static/p2"))
    add("ban", req("BAN", "/static/banned"))
    add("miss after ban", g("/static/b2"), req("BAN", "/static/b2"), g("/static/b2"))
    add("esi page miss", g("/esi/page"))
    add("esi page hit", g("/esi/p2"), g("/esi/p2"))
    add("esi page gzip client", g("/esi/p3", "Accept-Encoding: gzip"))
    add("gzip'd origin, gzip client", g("/pregz/a", "Accept-Encoding: gzip"))
    add("gzip'd origin, plain client", g("/pregz/b"))
    add("gzip'd origin, plain client hit", g("/pregz/c", "Accept-Encoding: gzip"), g("/pregz/c"))
    add("do_gzip miss", g("/dogz/a", "Accept-Encoding: gzip"))
    add("do_gzip hit, plain client", g("/dogz/b", "Accept-Encoding: gzip"), g("/dogz/b"))
    add("accept-encoding dropped", g("/static/ae", "Accept-Encoding: br"))
    add("404 cached", g("/e404/a"))
    add("500 from origin", g("/e500/a"))
    add("retry", g("/retry/a"))
    add("restart", g("/restart/a"))
    add("backend error by vcl", g("/berr/a"))
    add("backend down", g("/down/a"))
    add("no-store", g("/nostore/a"))
    add("set-cookie (hit-for-miss)", g("/cookie/a"), g("/cookie/a"))
    add("hit-for-miss by vcl", g("/hfm/a"), g("/hfm/a"))
    add("hit-for-pass", g("/hfp/a"), g("/hfp/a"))
    add("vary hit", g("/vary/a", "Accept-Language: en"), g("/vary/a", "Accept-Language: en"))
    add("vary other variant", g("/vary/b", "Accept-Language: en"), g("/vary/b", "Accept-Language: fr"))
    add("hash by header", g("/static/lang", "X-Lang: fr"))
    add("conditional hit 304", g("/etag/a"), g("/etag/a", 'If-None-Match: "v1"'))
    add("range hit", g("/static/range"), g("/static/range", "Range: bytes=0-9"))
    add("range unsatisfiable", g("/static/r2"), g("/static/r2", "Range: bytes=9000-9999"))
    add("HEAD miss", req("HEAD", "/static/head"))
    add("HEAD hit", g("/static/head2"), req("HEAD", "/static/head2"))
    add("redirect", g("/redirect/a"))
    add("big body", g("/big/a"))
    add("backend fetch edits", g("/bf/a"))
    add("response header removed", g("/powered/a"))
    add("grace hit", g("/short/a"), ("sleep", 0.5), g("/short/a"))
    add("http/1.0 client", req("GET", "/static/h10").replace(b"HTTP/1.1", b"HTTP/1.0"))
    add("bad request", b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    add("http/2 miss", ("h2", "/static/h2"))
    return k


def normalise(tag, payload):
    """A record as compared: what does not name this run or this server."""
    p = payload.strip()
    if tag == "Timestamp":
        return p.split(":")[0]
    if tag in ("Begin", "Link"):
        return " ".join(w for w in p.split() if not w.isdigit())
    if tag in ("ReqStart", "SessOpen", "ReqAcct", "BereqAcct", "PipeAcct", "SessClose", "Length"):
        return ""
    if tag == "BackendOpen":
        w = p.split()
        return " ".join([w[1], w[-1]]) if len(w) > 2 else p
    if tag == "BackendClose":
        w = p.split()
        return " ".join(w[1:]) if w else p
    if tag.endswith("Header") or tag.endswith("Unset"):
        name, _, value = p.partition(":")
        if name.lower() in ("date", "x-varnish", "age", "via", "server", "content-length", "host", "last-modified", "etag"):
            return name
        return name + ":" + value.strip()
    if tag in ("TTL", "Hit", "HitMiss", "HitPass"):
        return " ".join(w for w in p.split() if not re.match(r"^-?[0-9.]+$", w))
    if tag == "Gzip":
        # Compressed sizes and bit offsets are the compressor's own: what
        # a gzip record (G) read, what a gunzip record (U) wrote.
        w = p.split()
        return " ".join(w[:4] if w[:1] == ["G"] else w[:3] + w[4:5])
    if tag == "Fetch_Body":
        return " ".join(p.split()[1:])
    if tag == "FetchError":
        return re.sub(r"\d+", "N", p)
    return p


def groups(text):
    """The request groups of a `-g request` log, each a list of records."""
    out, cur = [], None
    for line in text.splitlines():
        if re.match(r"^\*\s", line):
            cur = []
            out.append(cur)
            continue
        m = re.match(r"^(-+)\s+(\S+)\s?(.*)$", line)
        if line.startswith("**"):
            continue
        if m and cur is not None:
            cur.append((len(m.group(1)), m.group(2), m.group(3)))
    return out


def transactions(records):
    """A group's records cut into its transactions, each from its Begin."""
    out = []
    for rec in records:
        if rec[1] == "Begin" or not out:
            out.append([])
        out[-1].append(rec)
    return out


def canonical(records):
    """A group's records with its transactions after the first in one
    order: which of two siblings a log reader lists first (an ESI page's
    fetch or its include) depends on when each was flushed, in varnishd
    as in Lacquer, so it is not compared; each transaction's own records
    are, in their order."""
    ts = transactions(records)
    if len(ts) < 2:
        return records
    rest = sorted(ts[1:], key=lambda t: [(lvl, tag, val) for lvl, tag, val in t])
    return [r for t in [ts[0]] + rest for r in t]


def key_of(group):
    for _, tag, payload in group:
        if tag == "ReqURL":
            m = re.search(r"[?&]k=(\d+)", payload)
            if m:
                return int(m.group(1))
    return None


def run(lacquer, verbose, minimum):
    work = tempfile.mkdtemp()
    os.chmod(work, 0o755)
    procs = []
    try:
        origin_port = free_port()
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", origin_port), Origin)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with open(os.path.join(work, "t.vcl"), "w") as f:
            f.write(VCL % {"origin": origin_port})
        os.chmod(os.path.join(work, "t.vcl"), 0o644)
        vport, lport = free_port(), free_port()
        common = ["-j", "none", "-T", "none", "-f", os.path.join(work, "t.vcl"), "-p", "feature=+http2"]
        subprocess.run(["varnishd", "-n", os.path.join(work, "v"), "-a", "127.0.0.1:%d" % vport,
                        "-P", os.path.join(work, "v.pid")] + common, check=True,
                       stdout=subprocess.DEVNULL)
        procs.append(("pidfile", os.path.join(work, "v.pid")))
        lq = subprocess.Popen([lacquer, "serve", "-n", os.path.join(work, "l"), "-a", "127.0.0.1:%d" % lport] + common,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(("proc", lq))
        for port in (vport, lport):
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
        kinds = corpus()
        for port in (vport, lport):
            Origin.retries.clear()
            for i, (_, reqs) in enumerate(kinds):
                for j, r in enumerate(reqs):
                    mark = ("k=%d" if j == len(reqs) - 1 else "s=%d") % i
                    if isinstance(r, tuple) and r[0] == "sleep":
                        time.sleep(r[1])
                    elif isinstance(r, tuple) and r[0] == "h2":
                        send(port, None, h2_url="%s?%s" % (r[1], mark))
                    else:
                        line, _, rest = r.partition(b"\r\n")
                        method, url, proto = line.split(b" ", 2)
                        url += (b"&" if b"?" in url else b"?") + mark.encode()
                        send(port, b" ".join([method, url, proto]) + b"\r\n" + rest)
        time.sleep(1)
        vlog = subprocess.run(["varnishlog", "-n", os.path.join(work, "v"), "-d", "-g", "request"],
                              capture_output=True, text=True, timeout=30).stdout
        llog = subprocess.run([lacquer, "log", "-n", os.path.join(work, "l"), "-d", "-g", "request"],
                              capture_output=True, text=True, timeout=30).stdout
        dump = os.environ.get("COMPARE_LOG_DUMP")
        if dump:
            # Both logs as read, for a closer look (COMPARE_LOG_DUMP=dir).
            for name, text in (("varnishd.log", vlog), ("lacquer.log", llog)):
                with open(os.path.join(dump, name), "w") as f:
                    f.write(text)
        vg = {key_of(g): g for g in groups(vlog)}
        lg = {key_of(g): g for g in groups(llog)}
        same = 0
        tally = {}
        for i, (name, _) in enumerate(kinds):
            a = canonical([(lvl, t, normalise(t, p)) for lvl, t, p in vg.get(i, [])])
            b = canonical([(lvl, t, normalise(t, p)) for lvl, t, p in lg.get(i, [])])
            if a and a == b:
                same += 1
                print("same      %s" % name)
                continue
            print("DIFFERENT %s" % name)
            if not a or not b:
                print("    %s has no records" % ("varnishd" if not a else "lacquer"))
                continue
            ta, tb = transactions(a), transactions(b)
            for ra, rb in zip(ta, tb):
                side = ra[0][2].split()[0]
                agreed, seen = tally.get(side, (0, 0))
                tally[side] = (agreed + (ra == rb), seen + 1)
            if verbose or len(ta) != len(tb):
                print("    %d transactions against %d" % (len(ta), len(tb)))
                for label, extra in (("varnishd", ta[len(tb):]), ("lacquer ", tb[len(ta):])):
                    for recs in extra if verbose else []:
                        shown = " | ".join("%s %s" % (t, v) for _, t, v in recs)
                        print("    %s only: %s" % (label, shown))
            for x, (ra, rb) in enumerate(zip(ta, tb)):
                if ra == rb:
                    continue
                n = next((y for y in range(min(len(ra), len(rb))) if ra[y] != rb[y]), min(len(ra), len(rb)))
                stop = None if verbose else n + 3
                for label, recs in (("varnishd", ra), ("lacquer ", rb)):
                    shown = " | ".join("%s %s" % (t, v) for _, t, v in recs[n:stop])
                    print("    %s %s at %d: %s" % (label, recs[0][2], n, shown))
        print("%d of %d kinds agree" % (same, len(kinds)))
        for side, (agreed, seen) in sorted(tally.items()):
            print("  in the kinds that differ, %s transactions: %d of %d agree" % (side, agreed, seen))
        return 0 if same >= (minimum if minimum is not None else len(kinds)) else 1
    finally:
        for kind, what in procs:
            try:
                if kind == "proc":
                    what.terminate()
                    what.wait(5)
                else:
                    with open(what) as f:
                        os.kill(int(f.read().strip()), 15)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        time.sleep(0.3)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[2:]
    verbose = "-v" in args
    rest = [a for a in args if a != "-v"]
    sys.exit(run(sys.argv[1], verbose, int(rest[0]) if rest else None))
