#!/usr/bin/env python3
"""dnsbad.py: a small DNS server that answers badly on purpose, for tests.

Usage:
  dnsbad.py --listen ADDR:PORT --log FILE [--zone NAME=IP[,IP...]]... [--ttl S]

  --listen ADDR:PORT  where to answer, UDP and TCP (IPv6 in brackets:
                      "[::1]:53")
  --log FILE          every question received is appended to FILE as one
                      line "NAME TYPE" (NAME lowercased, no trailing dot, "."
                      for the root; TYPE a mnemonic such as A or AAAA, else
                      TYPEnn), flushed at once, before it is answered (or
                      not); a message that is no readable query is not
                      logged there (a note goes to stderr)
  --zone NAME=IP,...  NAME (exactly that name) has these addresses; IPv4
                      ones answer A, IPv6 ones AAAA; may be repeated
  --ttl S             TTL of the answers (default 60)

What it answers, by the question's name:
  a --zone name        its A or AAAA records; NOERROR without records
                       (NODATA) for another type or a family it has none of
  under refused.test   REFUSED
  under servfail.test  SERVFAIL
  under silent.test    nothing at all, ever (over TCP the connection is
                       held open until the client closes it)
  anything else        NXDOMAIN
("under Z": Z itself or any name ending in ".Z".)

Queries are answered as asked: the id, opcode and RD are copied, the
question is echoed as received (case kept).  An answer larger than the
query allows over UDP (512 bytes, or its EDNS size) is sent truncated (TC
set, no record) so the client asks again over TCP.  A message that is no
query (shorter than a header, QR set, another opcode, QDCOUNT other than 1,
a compressed or overlong question name) is ignored, never answered; no
input stops the server.  Uses the standard library only.
"""

import argparse
import ipaddress
import socket
import socketserver
import struct
import sys
import threading

QTYPES = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX",
          16: "TXT", 28: "AAAA", 33: "SRV", 41: "OPT", 64: "SVCB",
          65: "HTTPS", 255: "ANY"}
NOERROR, SERVFAIL, NXDOMAIN, REFUSED = 0, 2, 3, 5


class Bad(Exception):
    """The message is not a query we answer."""


def under(name, zone):
    return name == zone or name.endswith("." + zone)


class Server:
    def __init__(self, zones, log, ttl):
        self.zones = zones      # name -> ([v4 bytes], [v6 bytes])
        self.logf = log
        self.ttl = ttl
        self.lock = threading.Lock()

    def log(self, line):
        with self.lock:
            try:
                self.logf.write(line + "\n")
                self.logf.flush()
            except (OSError, ValueError):
                pass

    @staticmethod
    def parse(m):
        """(id, flags, name, qtype, end of question, udp size) of a query."""
        if len(m) < 12:
            raise Bad()
        qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", m[:12])
        if flags & 0x8000 or (flags >> 11) & 0xF != 0 or qd != 1:
            raise Bad()
        off, labels, total = 12, [], 1
        while True:
            if off >= len(m):
                raise Bad()
            n = m[off]
            if n == 0:
                off += 1
                break
            if n & 0xC0 or off + 1 + n > len(m):
                raise Bad()     # compression or a label past the end
            total += n + 1
            if total > 255:
                raise Bad()
            labels.append(m[off + 1:off + 1 + n])
            off += 1 + n
        if off + 4 > len(m):
            raise Bad()
        qtype, _ = struct.unpack("!HH", m[off:off + 4])
        off += 4
        udp = 512
        # an OPT record right after the question: its udp size
        if ar >= 1 and len(m) >= off + 11 and m[off] == 0 and \
                struct.unpack("!H", m[off + 1:off + 3])[0] == 41:
            udp = max(512, struct.unpack("!H", m[off + 3:off + 5])[0])
        name = b".".join(labels).decode("latin-1").lower() or "."
        return qid, flags, name, qtype, off, udp

    def answer(self, m, tcp):
        """The response bytes to m, or None to say nothing."""
        try:
            qid, flags, name, qtype, qend, udp = self.parse(m)
        except (Bad, IndexError, struct.error):
            print("dnsbad: ignored a message of %d bytes that is no query"
                  % len(m), file=sys.stderr, flush=True)
            return None
        tname = QTYPES.get(qtype, "TYPE%d" % qtype)
        # names of ours are printable; anything else is shown escaped
        shown = "".join(c if 0x21 <= ord(c) < 0x7F else "\\%03d" % ord(c)
                        for c in name)
        self.log("%s %s" % (shown, tname))
        if under(name, "silent.test"):
            return None
        records = []
        if under(name, "refused.test"):
            rcode = REFUSED
        elif under(name, "servfail.test"):
            rcode = SERVFAIL
        elif name in self.zones:
            rcode = NOERROR
            v4, v6 = self.zones[name]
            if qtype == 1:
                records = [(1, a) for a in v4]
            elif qtype == 28:
                records = [(28, a) for a in v6]
        else:
            rcode = NXDOMAIN
        rflags = 0x8000 | (flags & 0x7900) | 0x0080 | rcode
        if records:
            rflags |= 0x0400    # authoritative for what it was given
        question = m[12:qend]
        body = b"".join(struct.pack("!HHHIH", 0xC00C, t, 1, self.ttl,
                                    len(a)) + a for t, a in records)
        resp = struct.pack("!HHHHHH", qid, rflags, 1, len(records), 0, 0) + \
            question + body
        if not tcp and len(resp) > udp:
            resp = struct.pack("!HHHHHH", qid, rflags | 0x0200, 1, 0, 0, 0) + \
                question
        return resp


def serve_udp(srv, sock):
    while True:
        try:
            m, peer = sock.recvfrom(65535)
        except InterruptedError:
            continue
        except OSError as e:
            print("dnsbad: udp: %s" % e, file=sys.stderr, flush=True)
            continue
        try:
            r = srv.answer(m, False)
            if r is not None:
                sock.sendto(r, peer)
        except Exception as e:  # noqa: BLE001 -- nothing may stop the loop
            print("dnsbad: udp answer: %r" % e, file=sys.stderr, flush=True)


class TCPHandler(socketserver.BaseRequestHandler):
    def need(self, n):
        got = b""
        while len(got) < n:
            b = self.request.recv(n - len(got))
            if not b:
                raise EOFError
            got += b
        return got

    def handle(self):
        srv = self.server.dns
        self.request.settimeout(30)
        try:
            while True:
                n = struct.unpack("!H", self.need(2))[0]
                r = srv.answer(self.need(n), True)
                if r is None:
                    # silent or malformed: hold until the client goes
                    while self.request.recv(4096):
                        pass
                    return
                self.request.sendall(struct.pack("!H", len(r)) + r)
        except (EOFError, OSError):
            return
        except Exception as e:  # noqa: BLE001
            print("dnsbad: tcp: %r" % e, file=sys.stderr, flush=True)


class TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def parse_listen(s):
    host, sep, port = s.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError("ADDR:PORT wanted: %s" % s)
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return fam, host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError("bad port: %s" % s) from None


def parse_zone(s):
    name, sep, addrs = s.partition("=")
    name = name.strip().rstrip(".").lower()
    if not sep or not name or not addrs:
        raise argparse.ArgumentTypeError("NAME=IP[,IP...] wanted: %s" % s)
    v4, v6 = [], []
    for a in addrs.split(","):
        try:
            ip = ipaddress.ip_address(a.strip())
        except ValueError:
            raise argparse.ArgumentTypeError("bad address %r in %s" %
                                             (a, s)) from None
        (v4 if ip.version == 4 else v6).append(ip.packed)
    return name, v4, v6


def main():
    p = argparse.ArgumentParser(
        description="a DNS server that answers badly on purpose")
    p.add_argument("--listen", required=True, type=parse_listen)
    p.add_argument("--log", required=True)
    p.add_argument("--zone", action="append", default=[], type=parse_zone)
    p.add_argument("--ttl", type=int, default=60)
    a = p.parse_args()

    zones = {}
    for name, v4, v6 in a.zone:
        z = zones.setdefault(name, ([], []))
        z[0].extend(v4)
        z[1].extend(v6)
    srv = Server(zones, open(a.log, "a"), a.ttl)

    fam, host, port = a.listen
    udp = socket.socket(fam, socket.SOCK_DGRAM)
    udp.bind((host, port))

    class _TCP(TCPServer):
        address_family = fam
    tcp = _TCP((host, port), TCPHandler)
    tcp.dns = srv
    threading.Thread(target=tcp.serve_forever, daemon=True).start()
    print("dnsbad: listening on %s port %d" % (host, port), flush=True)
    try:
        serve_udp(srv, udp)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
