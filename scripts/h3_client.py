"""An HTTP/3 client on aioquic for scripts/test-h3: runs one of the QUIC
interop runner's client cases against a server and checks every body
against the files it was made from.

Usage: h3_client.py CASE HOST PORT SNI SITE_DIR
CASE: handshake, transfer, retry, resumption, zerortt, chacha20,
keyupdate, multiconnect; versionnegotiation sends a datagram of its own
rather than use aioquic.
"""

import asyncio
import ssl
import sys
from pathlib import Path

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.tls import CipherSuite

FILES = ("small", "medium", "large")


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.streams = {}

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            if not isinstance(e, (HeadersReceived, DataReceived)):
                continue
            done, head, body = self.streams[e.stream_id]
            if isinstance(e, HeadersReceived):
                head.extend(e.headers)
            else:
                body.extend(e.data)
            if e.stream_ended and not done.done():
                done.set_result(None)

    async def get(self, sni, path):
        sid = self._quic.get_next_available_stream_id()
        done = self._loop.create_future()
        self.streams[sid] = (done, [], bytearray())
        self.h3.send_headers(
            sid,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", sni.encode()),
                (b":path", path.encode()),
            ],
            end_stream=True,
        )
        self.transmit()
        await asyncio.wait_for(done, 60)
        _, head, body = self.streams.pop(sid)
        status = dict(head).get(b":status")
        return status, bytes(body)


def configuration(sni, **settings):
    c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=sni)
    c.verify_mode = ssl.CERT_NONE
    for name, value in settings.items():
        setattr(c, name, value)
    return c


async def fetch(host, port, sni, site, names, config, early=False, before=None):
    """Fetches `names` on one connection; returns the protocol."""
    async with connect(
        host, port, configuration=config, create_protocol=Client, wait_connected=not early
    ) as client:
        if before:
            before(client)
        results = await asyncio.gather(*(client.get(sni, f"/{n}") for n in names))
        for name, (status, body) in zip(names, results):
            want = (site / name).read_bytes()
            if status != b"200" or body != want:
                raise SystemExit(f"{name}: status {status}, {len(body)} bytes of {len(want)}")
        return client


def version_negotiation(host, port):
    """Sends an Initial of a version no one speaks (a long header, 1200
    bytes as a first datagram must be) and checks the answer: a Version
    Negotiation packet (version 0) for our connection IDs, listing
    version 1."""
    import os
    import socket

    dcid, scid = os.urandom(8), os.urandom(8)
    packet = bytes([0xC0]) + (0x1A2A3A4A).to_bytes(4, "big")
    packet += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    packet += bytes(1200 - len(packet))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(packet, (host, port))
    answer, _ = s.recvfrom(2048)
    if answer[0] & 0x80 == 0 or answer[1:5] != bytes(4):
        raise SystemExit(f"not a Version Negotiation packet: {answer[:8].hex()}")
    at = 5
    got_dcid = answer[at + 1 : at + 1 + answer[at]]
    at += 1 + answer[at]
    got_scid = answer[at + 1 : at + 1 + answer[at]]
    at += 1 + answer[at]
    versions = [int.from_bytes(answer[i : i + 4], "big") for i in range(at, len(answer), 4)]
    if (got_dcid, got_scid) != (scid, dcid):
        raise SystemExit("the connection IDs are not ours, swapped")
    if 1 not in versions:
        raise SystemExit(f"version 1 not offered: {[hex(v) for v in versions]}")


def amplification(host, port, sni):
    """Sends a client's first flight from an address that then says
    nothing more, and counts what the server sends back while it waits
    and retransmits: never more than three times what came (RFC 9000
    §8.1). The certificate `sni` names is large enough that a whole
    flight would be more."""
    import socket
    import time

    from aioquic.quic.connection import QuicConnection

    conn = QuicConnection(configuration=configuration(sni))
    conn.connect((host, port), now=time.time())
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 0
    for data, _ in conn.datagrams_to_send(now=time.time()):
        s.sendto(data, (host, port))
        sent += len(data)
    received, end = 0, time.time() + 4
    s.settimeout(0.2)
    while time.time() < end:
        try:
            received += len(s.recvfrom(65536)[0])
        except socket.timeout:
            pass
    if received > 3 * sent:
        raise SystemExit(f"{received} bytes sent back for {sent}")
    if received <= 2 * sent:
        raise SystemExit(f"only {received} bytes for {sent}: the limit was not reached")
    print(f"{received} bytes for {sent}")


async def main(case, host, port, sni, site):
    port, site = int(port), Path(site)
    if case in ("handshake", "retry"):
        await fetch(host, port, sni, site, ["small"], configuration(sni))
    elif case == "transfer":
        await fetch(host, port, sni, site, list(FILES), configuration(sni))
    elif case == "chacha20":
        config = configuration(sni, cipher_suites=[CipherSuite.CHACHA20_POLY1305_SHA256])
        await fetch(host, port, sni, site, ["medium"], config)
    elif case == "keyupdate":
        await fetch(
            host, port, sni, site, ["large"], configuration(sni),
            before=lambda c: c._quic.request_key_update(),
        )
    elif case == "multiconnect":
        for _ in range(5):
            await fetch(host, port, sni, site, ["small"], configuration(sni))
    elif case == "versionnegotiation":
        version_negotiation(host, port)
    elif case == "amplification":
        amplification(host, port, sni)
    elif case in ("resumption", "zerortt"):
        tickets = []
        first = configuration(sni)
        async with connect(
            host, port, configuration=first, create_protocol=Client,
            session_ticket_handler=tickets.append,
        ) as client:
            await client.get(sni, "/small")
            await asyncio.sleep(0.2)
        if not tickets:
            raise SystemExit("no session ticket")
        again = configuration(sni, session_ticket=tickets[-1])
        client = await fetch(
            host, port, sni, site, ["small", "medium"], again, early=case == "zerortt"
        )
        tls = client._quic.tls
        if not tls.session_resumed:
            raise SystemExit("not resumed")
        if case == "zerortt" and not tls.early_data_accepted:
            raise SystemExit("0-RTT not accepted")
    else:
        raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
