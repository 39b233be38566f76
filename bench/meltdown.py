#!/usr/bin/env python3
"""The two ends of the seed-000 meltdown scenario.

  meltdown.py origin PORT BASE_MS PER_MS
      An origin like the seed's Node application. "/" is a cacheable
      page of about 64 KB that announces ESI (Surrogate-Control) and
      includes /dynamic-partials/partial/esiContent. That fragment is
      "Cache-Control: private, max-age=0" and answers after
      BASE_MS + PER_MS * (requests in flight): the more work is piled on
      it, the slower it gets. Like a busy application server, it does not
      notice that a requester has gone; it finishes the work anyway.
      "/stats" tells, as JSON, how many fragment requests are in flight,
      how many of those still have their requester connected, the peak
      and the total served.

  meltdown.py load PORT CLIENTS SECONDS PATIENCE
      CLIENTS clients asking for "/" one request after another for
      SECONDS (keep-alive), each giving up on a response after PATIENCE
      seconds: it closes its connection and starts again on a new one, as
      a front proxy with a 10 s upstream timeout does. Prints JSON:
      responses, pages that carried the fragment, give-ups, errors,
      latency percentiles of the responses, the longest one.
"""
import asyncio
import json
import sys
import time

FRAGMENT = "/dynamic-partials/partial/esiContent"


# ---------------------------------------------------------------- origin

def page_body():
    filler = "".join(
        '<div class="teaser"><h2>Article %d</h2><p>%s</p></div>\n' % (i, "lorem ipsum " * 40)
        for i in range(120)
    )
    html = (
        "<!DOCTYPE html><html><head><title>Home</title></head><body>\n"
        '<header><esi:include src="%s"/></header>\n%s</body></html>\n' % (FRAGMENT, filler)
    )
    return html.encode()[:64517]


class Origin:
    def __init__(self, base, per):
        self.base = base
        self.per = per
        self.in_flight = []  # the StreamReaders of requests being worked on
        self.peak = 0
        self.served = 0
        self.page = page_body()

    def stats(self):
        waited = sum(1 for r in self.in_flight if not r.at_eof())
        return {
            "in_flight": len(self.in_flight),
            "waited_for": waited,
            "peak_in_flight": self.peak,
            "served": self.served,
        }

    async def handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                if path == FRAGMENT:
                    self.in_flight.append(reader)
                    self.peak = max(self.peak, len(self.in_flight))
                    delay = (self.base + self.per * (len(self.in_flight) - 1)) / 1000.0
                    try:
                        await asyncio.sleep(delay)
                    finally:
                        self.in_flight.remove(reader)
                    self.served += 1
                    body = b"<span>personal: %d</span>" % self.served
                    cc = "private, max-age=0"
                    extra = ""
                elif path == "/stats":
                    body = json.dumps(self.stats()).encode()
                    cc = "no-store"
                    extra = ""
                else:
                    body = self.page
                    cc = "max-age=3600"
                    extra = 'Surrogate-Control: content="ESI/1.0"\r\n'
                writer.write(
                    (
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                        "Cache-Control: %s\r\n%sContent-Length: %d\r\n\r\n"
                        % (cc, extra, len(body))
                    ).encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()


async def serve_origin(port, base, per):
    origin = Origin(base, per)
    server = await asyncio.start_server(origin.handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


# ------------------------------------------------------------------ load

async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    else:
        body = await reader.read()
    return status, body, headers.get("connection", "").lower() == "close"


async def client(port, deadline, patience, results):
    request = b"GET / HTTP/1.1\r\nHost: app.example.com\r\nUser-Agent: meltdown\r\n\r\n"
    conn = None
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            if conn is None:
                conn = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), patience
                )
            reader, writer = conn
            writer.write(request)
            left = min(patience - (time.monotonic() - start), deadline - time.monotonic())
            status, body, close = await asyncio.wait_for(read_response(reader), max(left, 0.001))
            results["latencies"].append(time.monotonic() - start)
            results["status"][status] = results["status"].get(status, 0) + 1
            if b"personal:" in body:
                results["with_fragment"] += 1
            if close:
                writer.close()
                conn = None
        except asyncio.TimeoutError:
            if time.monotonic() < deadline:
                results["gave_up"] += 1
            if conn is not None:
                conn[1].close()
            conn = None
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            results["errors"] += 1
            if conn is not None:
                conn[1].close()
            conn = None
            await asyncio.sleep(0.01)
    if conn is not None:
        conn[1].close()


async def run_load(port, clients, seconds, patience):
    results = {"latencies": [], "status": {}, "with_fragment": 0, "gave_up": 0, "errors": 0}
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(client(port, deadline, patience, results) for _ in range(clients)))
    lat = sorted(results["latencies"])

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 1) if lat else None

    print(
        json.dumps(
            {
                "responses": len(lat),
                "per_second": round(len(lat) / seconds, 1),
                "with_fragment": results["with_fragment"],
                "status": results["status"],
                "gave_up": results["gave_up"],
                "errors": results["errors"],
                "p50_ms": pct(0.50),
                "p99_ms": pct(0.99),
                "max_ms": round(lat[-1] * 1000, 1) if lat else None,
            }
        )
    )


def main():
    mode = sys.argv[1]
    if mode == "origin":
        asyncio.run(serve_origin(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])))
    elif mode == "load":
        asyncio.run(
            run_load(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
        )
    else:
        sys.exit("usage: meltdown.py origin PORT BASE_MS PER_MS | load PORT CLIENTS SECONDS PATIENCE")


if __name__ == "__main__":
    main()
