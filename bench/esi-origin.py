#!/usr/bin/env python3
"""An origin for the ESI benchmarks: /page is a cacheable page that
ESI-includes N fragments; /frag/<i> answers after DELAY seconds and may
not be cached. Usage: esi-origin.py PORT [N] [DELAY]."""
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10
DELAY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/frag/"):
            time.sleep(DELAY)
            body = ("<b>fragment %s</b>" % self.path[6:]).encode()
            cc = "private, max-age=0"
        elif self.path.startswith("/page"):
            parts = ["<html><body>"]
            for i in range(N):
                parts.append('<div><esi:include src="/frag/%d"/></div>' % i)
            parts.append("</body></html>")
            body = "".join(parts).encode()
            cc = "max-age=3600"
        else:
            body = b"ok"
            cc = "max-age=3600"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Cache-Control", cc)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
