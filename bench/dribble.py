"""A request head sent a byte at a time: what each byte costs the server.

Sends CONNS requests for /1k whose heads are SIZE bytes (filled with
1000-byte header lines), each head one byte per send with Nagle off, and
prints the server's CPU time (user + system, from /proc) in all and
per byte. A server that scans the whole head again on every read pays
more per byte the longer the head; run it at two sizes and compare.

Usage: dribble.py PORT PID SIZE CONNS
"""

import socket
import sys
import time

from procstat import cpu_seconds, family


def main():
    port, pid, size, conns = (int(a) for a in sys.argv[1:5])
    procs = family(pid)
    line = b"X-Filler: " + b"a" * 988 + b"\r\n"
    head = b"GET /1k HTTP/1.1\r\nHost: bench\r\n" + line * max((size - 40) // len(line), 0) + b"\r\n"
    before = cpu_seconds(procs)
    sends = 0
    for _ in range(conns):
        s = socket.socket()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect(("127.0.0.1", port))
        for i in range(len(head)):
            s.send(head[i:i + 1])
            sends += 1
            if i % 64 == 0:
                time.sleep(0)
        answer = s.recv(64)
        s.close()
        if not answer.startswith(b"HTTP/1.1 200"):
            print(f"answered {answer!r}", file=sys.stderr)
            sys.exit(1)
    spent = cpu_seconds(procs) - before
    print(f"head {len(head):6} bytes, a byte a send: server CPU {spent * 1e3:6.0f} ms, "
          f"{spent * 1e6 / sends:.2f} us/byte")


main()
