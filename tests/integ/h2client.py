#!/usr/bin/env python3
"""h2client.py: an HTTP/2 client for tests/integ/h2.sh, with python3-h2
for the protocol and raw frames for the abuse it must survive.

usage: h2client.py ADDR:PORT --name SNI --ca CAFILE [--authority A]
                   [--req JSON]... [--flood KIND --count N] [--timeout S]

Each --req is {"method","path","headers":{..},"body":"..","trailers":{..},
"window":N} (all optional but path; trailers end the stream after the body); the requests go out together, one stream each,
on one connection.  With --flood, KIND's frames are sent after the
requests (rapid-reset, ping, settings, priority, continuation,
hpack-bomb, empty-data, made-you-reset, streams, slow-head, tiny-data).

Output: one JSON line per stream ({"id","status","headers","body",
"trailers","reset"}), then {"goaway": CODE or null, "alpn", "end"}.
"""
import argparse
import json
import socket
import ssl
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

FRAME_DATA, FRAME_HEADERS, FRAME_PRIORITY, FRAME_RST = 0, 1, 2, 3
FRAME_SETTINGS, FRAME_PING, FRAME_GOAWAY, FRAME_WINDOW, FRAME_CONT = 4, 6, 7, 8, 9


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid & 0x7FFFFFFF) + payload


def hpack_literal(name, value):
    """A literal header field without indexing, new name (RFC 7541 6.2.2)."""
    def s(b):
        n = len(b)
        if n < 127:
            return bytes([n]) + b
        out = bytes([127])
        n -= 127
        while n >= 128:
            out += bytes([(n % 128) + 128])
            n //= 128
        return out + bytes([n]) + b
    return b"\x00" + s(name) + s(value)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("--name", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--authority")
    ap.add_argument("--req", action="append", default=[])
    ap.add_argument("--flood")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=8)
    ap.add_argument("--window", type=int)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--ready")
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    if a.idle:
        return hold_idle(a, host.strip("[]"), int(port))
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((host.strip("[]"), int(port)), timeout=a.timeout)
    sock = ctx.wrap_socket(raw, server_hostname=a.name)
    alpn = sock.selected_alpn_protocol()
    out = {"alpn": alpn, "goaway": None, "end": None}
    if alpn != "h2":
        out["end"] = "no-h2"
        print(json.dumps(out))
        return
    cfg = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                    validate_outbound_headers=False,
                                    normalize_outbound_headers=False)
    conn = h2.connection.H2Connection(config=cfg)
    conn.initiate_connection()
    if a.window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: a.window})
    sock.sendall(conn.data_to_send())
    streams = {}
    pending = {}
    authority = a.authority or a.name
    for r in map(json.loads, a.req):
        sid = conn.get_next_available_stream_id()
        hdrs = [(":method", r.get("method", "GET")), (":scheme", "https"),
                (":authority", r.get("authority", authority)), (":path", r["path"])]
        if r.get("protocol"):
            hdrs.append((":protocol", r["protocol"]))   # RFC 8441
        hdrs += [(k, v) for k, v in r.get("headers", {}).items()]
        body = r.get("body")
        if isinstance(body, str):
            body = body.encode()
        trailers = list(r.get("trailers", {}).items())
        if trailers and body is None:
            body = b""
        conn.send_headers(sid, hdrs, end_stream=body is None and not r.get("open"))
        if body is not None:
            pending[sid] = [body, not r.get("open"), trailers]
        streams[sid] = {"id": sid, "status": None, "headers": {}, "body": b"",
                        "trailers": {}, "reset": None}
    send_bodies(conn, pending, streams)
    sock.sendall(conn.data_to_send())
    if a.flood:
        flood(a, sock, conn, streams)
        raw_read(a, sock, out)
        print(json.dumps(out))
        return
    for data in reads(sock, a.timeout, out):
        if streams and all(s.get("done") for s in streams.values()):
            out["end"] = "done"
            break
        if data is None:
            continue
        try:
            events = conn.receive_data(data)
        except Exception as e:  # the server broke the protocol
            out["end"] = "protocol: %s" % e
            break
        for ev in events:
            s = streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                d = dict((k.decode(), v.decode()) for k, v in ev.headers)
                s["status"] = int(d.pop(":status"))
                s["headers"] = d
            elif isinstance(ev, h2.events.DataReceived):
                if s is not None:
                    s["body"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                s["trailers"] = dict((k.decode(), v.decode()) for k, v in ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                if s is not None:
                    s["done"] = True
            elif isinstance(ev, h2.events.StreamReset):
                if s is not None:
                    s["reset"] = int(ev.error_code)
                    s["done"] = True
            elif isinstance(ev, h2.events.ConnectionTerminated):
                out["goaway"] = int(ev.error_code)
        send_bodies(conn, pending, streams)
        try:
            sock.sendall(conn.data_to_send())
        except OSError:
            pass
    for s in streams.values():
        s.pop("done", None)
        try:
            s["body"] = s["body"].decode()
        except UnicodeDecodeError:
            s["body"] = s["body"].hex()
        print(json.dumps(s))
    print(json.dumps(out))


def hold_idle(a, host, port):
    """--idle N: N connections that say the preface and SETTINGS, read
    the server's, and then stay idle for --timeout s; --ready FILE is
    written once all are up."""
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.set_alpn_protocols(["h2"])
    socks = []
    for _ in range(a.idle):
        s = ctx.wrap_socket(socket.create_connection((host, port), timeout=10),
                            server_hostname=a.name)
        if s.selected_alpn_protocol() != "h2":
            print(json.dumps({"end": "no-h2", "held": len(socks)}))
            return 1
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(FRAME_SETTINGS, 0, 0))
        s.recv(65536)
        socks.append(s)
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("%d\n" % len(socks))
    time.sleep(a.timeout)
    print(json.dumps({"end": "done", "held": len(socks)}))
    return 0


def reads(sock, timeout, out):
    """What the server sends, until timeout: bytes, or None every half
    second of silence; out["end"] says how it ended (timeout, eof, error)."""
    deadline = time.time() + timeout
    sock.settimeout(0.5)
    out["end"] = "timeout"
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            yield None
            continue
        except (ssl.SSLError, OSError) as e:
            out["end"] = "error: %s" % e
            return
        if not data:
            out["end"] = "eof"
            return
        yield data


def send_bodies(conn, pending, streams):
    """Request bodies, as far as the windows let them."""
    for sid in list(pending):
        body, end, trailers = pending[sid]
        if streams[sid].get("done"):
            del pending[sid]
            continue
        while body:
            n = min(len(body), conn.local_flow_control_window(sid),
                    conn.max_outbound_frame_size)
            if n <= 0:
                break
            conn.send_data(sid, body[:n])
            body = body[n:]
        pending[sid][0] = body
        if not body:
            if end and trailers:
                conn.send_headers(sid, trailers, end_stream=True)
            elif end:
                conn.end_stream(sid)
            del pending[sid]


def raw_read(a, sock, out):
    """After a flood: frames read raw until GOAWAY, the end or the timeout."""
    buf = b""
    out["rst"] = 0
    for data in reads(sock, a.timeout, out):
        if data is None:
            continue
        buf += data
        while len(buf) >= 9:
            n = struct.unpack(">I", b"\0" + buf[:3])[0]
            if len(buf) < 9 + n:
                break
            t, payload = buf[3], buf[9:9 + n]
            buf = buf[9 + n:]
            if t == FRAME_RST:
                out["rst"] += 1
            elif t == FRAME_GOAWAY and len(payload) >= 8:
                out["goaway"] = struct.unpack(">I", payload[4:8])[0]
                # what follows the GOAWAY is the end of the connection
        if out["goaway"] is not None:
            sock.settimeout(2)
            try:
                while sock.recv(65536):
                    pass
                out["end"] = "eof"
            except (socket.timeout, ssl.SSLError, OSError) as e:
                out["end"] = "after-goaway: %s" % type(e).__name__
            return


def flood(a, sock, conn, streams):
    """Frames no polite client sends, written raw after the requests."""
    k, n = a.flood, a.count
    if not k:
        return
    # one header block, encoded once: the server's HPACK table follows ours
    hb = conn.encoder.encode([(":method", "POST" if k == "tiny-data" else "GET"),
                              (":scheme", "https"),
                              (":authority", a.authority or a.name),
                              (":path", "/upload" if k == "tiny-data" else "/pub/flood")])
    buf = b""
    sid = conn.get_next_available_stream_id()
    try:
        for i in range(n):
            if k == "rapid-reset":
                buf += frame(FRAME_HEADERS, 0x4, sid, hb) + \
                    frame(FRAME_RST, 0, sid, struct.pack(">I", 8))
                sid += 2
            elif k == "made-you-reset":
                # a stream window past 2^31-1: a stream error
                # (FLOW_CONTROL_ERROR) the server must answer with a reset
                buf += frame(FRAME_HEADERS, 0x4, sid, hb) + \
                    frame(FRAME_WINDOW, 0, sid, struct.pack(">I", 0x7fffffff))
                sid += 2
            elif k == "ping":
                buf += frame(FRAME_PING, 0, 0, struct.pack(">Q", i))
            elif k == "settings":
                buf += frame(FRAME_SETTINGS, 0, 0, struct.pack(">HI", 4, 65535))
            elif k == "priority":
                buf += frame(FRAME_PRIORITY, 0, sid + 2 * (i % 100),
                             struct.pack(">IB", 0, 16))
            elif k == "empty-data":
                if i == 0:
                    buf += frame(FRAME_HEADERS, 0x4, sid, hb)
                buf += frame(FRAME_DATA, 0, sid, b"")
            elif k == "continuation":
                if i == 0:
                    buf += frame(FRAME_HEADERS, 0, sid, hb)
                buf += frame(FRAME_CONT, 0, sid, hpack_literal(b"x-c%d" % i, b"v"))
            elif k == "hpack-bomb":
                # one big value, then indexed references to it: tiny on the
                # wire, huge once decoded
                if i == 0:
                    # literal with incremental indexing, new name "x",
                    # a value of 4000 bytes (the entry fits the 4096 table)
                    big = b"\x40" + bytes([1, ord("x")]) + \
                        bytes([0x7f]) + b"\xa1\x1e" + b"a" * 4000
                    blk = hb + big + b"\xbe" * 2000  # index 62: the entry just added
                    buf += frame(FRAME_HEADERS, 0x5, sid, blk)
                break
            elif k == "slow-head":
                # a header block never finished (no END_HEADERS, no
                # CONTINUATION): the stream must not wait forever
                buf += frame(FRAME_HEADERS, 0x1, sid, hb[:len(hb) // 2])
                break
            elif k == "tiny-data":
                # DATA of a byte a frame on one stream, up to its window
                if i == 0:
                    buf += frame(FRAME_HEADERS, 0x4, sid, hb)
                buf += frame(FRAME_DATA, 0x1 if i == n - 1 else 0, sid, b"x")
            elif k == "streams":
                buf += frame(FRAME_HEADERS, 0x4, sid, hb)
                sid += 2
            if len(buf) > 65536:
                sock.sendall(buf)
                buf = b""
        if buf:
            sock.sendall(buf)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
