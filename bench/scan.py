#!/usr/bin/env python3
"""The client of bench/scan.sh: a hot set requested over and over while a
crawler walks distinct URLs once each. Prints the hot set's hit ratio
before and during the crawl, judging a hit by X-Varnish carrying two
transaction ids (the request's and the object's), as both caches write it.

Usage: scan.py PORT HOT SCAN EVERY
  HOT    distinct hot URLs (/hot/N), warmed first
  SCAN   distinct crawl URLs (/scan/N), each asked once
  EVERY  crawl requests between two hot ones
"""
import http.client
import random
import sys


def main():
    port, hot, scan, every = (int(a) for a in sys.argv[1:5])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(path):
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return len(resp.getheader("X-Varnish", "").split()) == 2

    rng = random.Random(7)
    for _ in range(2):
        for n in range(hot):
            get(f"/hot/{n}")
    before = sum(get(f"/hot/{rng.randrange(hot)}") for _ in range(hot))
    hits = asked = 0
    for n in range(scan):
        get(f"/scan/{n}")
        if n % every == 0:
            hits += get(f"/hot/{rng.randrange(hot)}")
            asked += 1
    print(f"hot hit ratio before the crawl {before / hot:.3f}, during it {hits / asked:.3f}")


if __name__ == "__main__":
    main()
