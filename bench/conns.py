"""Connections that cost a server without a request: opens N connections
to a port and holds them, each silent (`idle`) or having sent the start
of a request head and no more (`partial`, a slowloris), then reports
what the server holds for them: how many it accepted (its open
descriptors), its resident anonymous memory per connection, how long a
real request takes meanwhile, and, after the server's idle timeout, how
many are still open.

Usage: conns.py PORT PID N idle|partial WAIT
(PID: the serving process; its children are counted with it; WAIT: the
seconds after which every held connection should have been closed.)
"""

import http.client
import socket
import sys
import time

from procstat import descriptors, rss_anon


def probe(port):
    """Seconds a fresh request for /1k takes (None when it fails)."""
    start = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/1k")
        r = c.getresponse()
        r.read()
        c.close()
        return time.monotonic() - start if r.status == 200 else None
    except OSError:
        return None


def main():
    port, pid, n, mode, wait = (int(sys.argv[1]), int(sys.argv[2]),
                                int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    probe(port)
    fds_before, rss_before = descriptors(pid), rss_anon(pid)
    held = []
    refused = 0
    for _ in range(n):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            if mode == "partial":
                s.sendall(b"GET /1k HTTP/1.1\r\nHost: bench\r\n")
            held.append(s)
        except OSError:
            refused += 1
            s.close()
    # Past a deferred accept's second: every connection is the server's.
    time.sleep(1.5)
    accepted = descriptors(pid) - fds_before
    grown = rss_anon(pid) - rss_before
    during = probe(port)
    time.sleep(wait)
    still = descriptors(pid) - fds_before
    after = probe(port)
    per = grown * 1024 / max(accepted, 1)
    fmt = lambda t: "failed" if t is None else f"{t * 1000:.1f} ms"
    print(f"{mode:8} held {len(held)} (refused {refused}), accepted {accepted}, "
          f"anon RSS +{grown} KiB, {per:.0f} bytes/connection, "
          f"request meanwhile {fmt(during)}, open after {wait:.0f} s: {still}, "
          f"request then {fmt(after)}")
    for s in held:
        s.close()


main()
