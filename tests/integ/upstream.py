#!/usr/bin/env python3
"""upstream.py: test servers, test clients and checks for sluice's integration
tests (python3 standard library only).

Servers (run inside a namespace; one process hosts many servers, one thread
per listener, each connection in its own thread):

  upstream.py serve --state-dir DIR [--ready FILE] SPEC...

  SPEC is NAME=KIND;LISTEN[,LISTEN...][;CERT;KEY[;CLIENTCA]]  with LISTEN
  1.2.3.4:443 or [fd00::1]:443.  KIND is
    tls      TLS (CERT/KEY) then HTTP/1.1 with keep-alive; with CLIENTCA a
             client certificate from it is required (each request records
             its CN as client_cn)
    http     plain HTTP/1.1 with keep-alive
    echo     raw TCP echo
    udp      counts datagrams, answers nothing
    origdst  TCP: answers "origdst ADDR PORT via LOCALPORT\\n" from
             SO_ORIGINAL_DST (proves the nftables redirect), then closes
    udpecho  UDP: answers "udp via LOCALPORT <data>"
  HTTP answers "hello from NAME\\n" (header X-Upstream: NAME); a request for
  /big?n=BYTES answers that many bytes, /slow?ms=N waits first, and
    /rand?n=BYTES[&seed=S][&chunked=1]  that many pseudo-random bytes (the
        same for the same seed), their SHA-256 in X-Body-SHA256, chunked
        on request
    /echo-headers, /upload  JSON {method, path, headers (as received, in
        order), sha256 and bytes of the body, chunked}; /upload?wait_ms=N
        waits N ms before it reads the body; with ?hop=1 the
        answer carries hop-by-hop headers (Connection: X-Resp-Hop,
        X-Resp-Hop, Keep-Alive, Proxy-Authenticate, Upgrade: h2c) and
        X-Resp-Ordinary: kept
    /bad-response?kind=K  a malformed answer, then the end of the
        connection: K is dupcl (two Content-Lengths), clte (both),
        fold (obs-fold), lf (bare LF), status (4 digits), nul (NUL in a
        header), extra (a second, unsolicited answer with body "smuggled")
    /sigv4/..., /s3/...  200 "sigv4 ok" when the request's SigV4 signature
        is botocore's with the credentials of STATE_DIR/aws-creds.json,
        else 403 "sigv4 mismatch"
    /reflect[?h=HEADER][&chunk=N[&te=CODING]|&close=1][&ce=CODING][&ge=CODING][&ms=N][&cookie=1]
        the value of HEADER (default Authorization) back in X-Echo and
        X-Echo-B64 and in the body: as is, base64 (standard, URL-safe, of
        the part after the first space, inside a longer JSON text),
        percent-encoded, hex, upper-case, JSON-escaped ("\\/"; \\u00XX for
        all but the unreserved), HTML-escaped and as HTML numeric
        references; Content-Length, or chunked in N-byte chunks, or
        close-delimited; Content-Encoding: CODING (grpc-encoding with
        ge) on request; after
        waiting N ms; with cookie=1 also Set-Cookie: sid=<the part after
        the first space> and Set-Cookie: plain=1
    /reset-mid[?close=1]  a head with Content-Length 1000 (with close=1:
        close-delimited) and 10 bytes of body, then a TCP reset: an
        upstream that dies mid-answer
    /stall?ms=N  a head with Content-Length 1000000 and 10 bytes of body,
        then nothing for N ms (default 20000), then the end of the
        connection: an upstream that stops mid-answer
    /ws with Upgrade: websocket  101, then a WebSocket echo (RFC 6455:
        text and binary frames echoed, ping answered, close returned);
        /ws without the upgrade: 400
  Request bodies are read as framed: Content-Length or chunked (any
  method); "Expect: 100-continue" is answered with 100 first.
  Each server keeps a state file DIR/NAME.json, rewritten atomically on every
  event: accepted (TCP accepts), handshakes, tls_errors, sni (list, "" for
  none), requests (list of {method, path, host, headers ([name, value] as
  received), body_sha256, body_bytes, chunked}), bytes, datagrams,
  ws_frames (WebSocket data frames echoed).

Checks:
  upstream.py snapshot DIR > SNAP
  upstream.py expect DIR SNAP 'NAME.FIELD=VALUE ...'
      compares the change since SNAP.  FIELD: accepted, handshakes,
      tls_errors, bytes, datagrams, requests (counts); hosts, paths, sni
      (comma-separated lists of the new entries, "-" for no SNI).  NAME "*"
      means every server (e.g. "*.accepted=0").
  upstream.py requests DIR SNAP NAME
      the requests server NAME recorded since SNAP, as one JSON list
  upstream.py audit FILE OFFSET [--timeout S] --expect 'k=v ...' [--expect ...]
      waits until, among the records after line OFFSET of the JSON Lines
      file, each --expect is matched by a distinct record (values compared as
      text; null, true, false as in JSON; "k=~RE" is a regular expression).
      An --expect '#N k=v ...' wants exactly N matching records instead,
      '#N-M k=v ...' between N and M.

Clients (print what happened, one fact a line; exit 0 unless misused):
  upstream.py tcp ADDR:PORT [--send S] [--wait S] [--timeout S]
      S takes \\x escapes; --wait keeps silent that long before sending
      prints connected / recv REPR / eof | reset | timeout | refused | error E
  upstream.py raw ADDR:PORT --send S [--wait S] [--close] [--timeout S]
      sends S (\\x escapes) in one write, reads until end of stream (--close:
      half-closes after sending), parses what came back as HTTP responses:
      "N: status=CODE upstream=NAME body=REPR" each, then "trailing REPR"
      for bytes that are no response, then eof | reset | timeout
      With --tls-name N --ca F the bytes go over TLS (SNI N, verified by
      F, ALPN http/1.1); --responses K stops reading once K responses are
      complete and --linger S (0.3) passed without the end ("open");
      --json prints {"n","status","headers","body"} per response, then
      {"trailing"} and {"end"}.  1xx (but 101), 204 and 304 have no body;
      after a 101 the rest is trailing.  --batch FILE instead of --send:
      one exchange per line "ID<TAB>S" of FILE, all at once (a thread
      each), JSON lines with "id" added.
  upstream.py ws ADDR:PORT --tls-name N --ca F [--path P] [--host H]
                 [--msg TEXT]... [--big BYTES]
      a WebSocket upgrade over TLS, then each message as a masked text
      frame (--big: one more of that size), each echo awaited; prints
      "status=CODE", "accept=ok|bad ...", "N: echo len=L" or "N: ...",
      "close op=8"; for another status "body=REPR", "then eof|data|..."
  upstream.py watch ADDR:PORT --tls-name N --ca F --ready FILE --go FILE
                    [--path P] [--hold S]
      an HTTPS connection held open (GET P/first, then FILE ready; GET
      P/again each time FILE go appears, go.done after); prints "first
      STATUS", "again STATUS" and, when the peer closes it, "closed
      eof|reset|tls-error|data EPOCH"
  upstream.py hello ADDR:PORT [--sni N] [--alpn P,...] [--pad BYTES]
                   [--cut BYTES] [--wait S] [--timeout S]
      sends a ClientHello built here (TLS 1.3 style, one record; --pad adds
      a padding extension, --cut sends only its first BYTES and keeps
      silent); prints "hello BYTES", then what came back: "server-hello",
      "alert LEVEL DESCRIPTION", "recv REPR", then eof | reset | timeout,
      and "elapsed=S" (whole seconds from the send to the end)
  upstream.py http-seq ADDR:PORT HOST [HOST...] [--path P] [--tls-name N --ca F]
      one request per HOST on a single kept-alive connection; prints
      "N: status=CODE upstream=NAME body=REPR" or "N: reset|eof|timeout"
  upstream.py hold ADDR:PORT --ready FILE --go FILE [--timeout S]
                  [--tls-name N --ca F]
      echo round trip, creates FILE ready, waits for FILE go, another round
      trip on the same connection; prints "first ok|..." "second ok|...";
      with --tls-name each round trip is an HTTPS GET (TLS to N, kept
      alive) that must answer 200
  upstream.py udp ADDR:PORT [--send S] [--timeout S]
      prints reply REPR or timeout
  upstream.py conns ADDR:PORT [--count N] [--hold S]
      opens N TCP connections at once and holds them S seconds, silent;
      prints "open=K failed=F", then "closed-by-peer=K" and "kept=K"
  upstream.py dns ADDR:PORT [--tcp [--pipeline|--dribble]] [--timeout S] MSG...
      the messages one after the other over one UDP socket or one TCP
      connection (length-prefixed), each waited for S (default 1) seconds;
      --pipeline: all written at once, answers matched by id; --dribble:
      each written one byte at a time.
      MSG is NAME[/TYPE] (a query, RD set, a random id) or bad:KIND, a
      malformed query: random (40 fixed bytes after the id), qdcount2,
      qdcount0, ptr (a compression pointer in the question, to itself),
      ptrfwd (a pointer forward), short (a label past the end), response
      (QR set), chaos (class CH), label64, name256 (a name of 256 bytes),
      twoopt (two OPT records), trailing (bytes after the question).  Prints
      "N: RCODE [tc] an=K TYPE=DATA ... size=BYTES [oversize]" (A and AAAA
      as addresses, CNAME as a name, other types as hex RDATA; oversize: a
      UDP answer past 512 bytes, which a query without EDNS does not
      allow), or "N: timeout", "N: eof",
      "N: reset", "N: badid ..." and, once a TCP connection ended,
      "N: closed"
  upstream.py dnsflood ADDR:PORT NAME [--type T] [--count N] [--rate QPS]
      N queries over one UDP socket, paced at QPS, answers collected until
      1 s after the last; prints "sent=N", "RCODE=N" per rcode seen,
      "none=N" (unanswered), "refused: none|some|most|all" (most: more
      than half, not all), "answered: ..." (NOERROR), "elapsed=S"
"""

import argparse
import base64
import codecs
import errno
import hashlib
import html
import json
import os
import re
import select
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import http.server
import urllib.parse


def parse_hostport(s):
    """'1.2.3.4:5' or '[v6]:5' -> (family, host, port)."""
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
        return socket.AF_INET6, host, int(port)
    host, _, port = s.rpartition(":")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    return fam, host, int(port)


def unescape(s):
    return codecs.decode(s.encode("latin-1"), "unicode_escape").encode("latin-1")


# ---------------------------------------------------------------- state

class State:
    def __init__(self, path, name, kind):
        self.path = path
        self.lock = threading.Lock()
        self.d = {"name": name, "kind": kind, "accepted": 0, "handshakes": 0,
                  "tls_errors": 0, "sni": [], "requests": [], "bytes": 0,
                  "datagrams": 0, "ws_frames": 0}
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.d, f)
        os.replace(tmp, self.path)

    def bump(self, key, n=1):
        with self.lock:
            self.d[key] += n
            self.write()

    def append(self, key, v):
        with self.lock:
            self.d[key].append(v)
            self.write()


# ---------------------------------------------------------------- servers

class TCPServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, fam, addr, handler, name, state, sslctx=None):
        self.address_family = fam
        self.name = name
        self.state = state
        self.sslctx = sslctx
        super().__init__(addr, handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()

    def verify_request(self, request, client_address):
        self.state.bump("accepted")
        return True

    def handle_error(self, request, client_address):
        pass        # clients that reset are part of the tests


class HTTPHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sluice-test-upstream"
    timeout = 30
    tls_failed = False

    def setup(self):
        self.request.settimeout(self.timeout)
        ctx = self.server.sslctx
        if ctx is not None:
            try:
                self.request = ctx.wrap_socket(self.request, server_side=True)
                self.server.state.bump("handshakes")
            except (ssl.SSLError, OSError):
                self.server.state.bump("tls_errors")
                self.tls_failed = True
        super().setup()

    def handle(self):
        if not self.tls_failed:
            try:
                super().handle()
            except (ConnectionError, socket.timeout, ssl.SSLError):
                pass

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        if isinstance(self.request, ssl.SSLSocket):
            try:
                self.request.settimeout(1)
                self.request.unwrap()       # close_notify, a clean TLS close
            except (OSError, ValueError):
                pass
        try:
            self.request.close()
        except OSError:
            pass

    def log_message(self, fmt, *args):
        pass

    def _read_body(self):
        """Reads the request body as framed (Content-Length or chunked,
        extensions skipped, trailer field lines kept in self.trailers);
        returns (SHA-256 hex, bytes, chunked)."""
        h = hashlib.sha256()
        n = 0
        self.trailers = []
        te = self.headers.get("Transfer-Encoding", "")
        if te.replace(" ", "").lower().endswith("chunked"):
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("eof in chunked body")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                        self.trailers.append(t.decode("latin-1").rstrip("\r\n"))
                    break
                left = size
                while left:
                    b = self.rfile.read(min(left, 65536))
                    if not b:
                        raise ConnectionError("eof in chunk")
                    h.update(b)
                    left -= len(b)
                n += size
                self.rfile.readline(3)
            return h.hexdigest(), n, True
        left = int(self.headers.get("Content-Length") or 0)
        while left:
            b = self.rfile.read(min(left, 65536))
            if not b:
                raise ConnectionError("eof in body")
            h.update(b)
            n += len(b)
            left -= len(b)
        return h.hexdigest(), n, False

    def _reset(self):
        """Ends the connection with a TCP reset (SO_LINGER 0), whatever
        TLS or HTTP framing was under way."""
        self.close_connection = True
        try:
            raw = self.connection
            if hasattr(raw, "unwrap"):      # TLS: reset the socket below
                raw = socket.socket(fileno=os.dup(raw.fileno()))
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                           struct.pack("ii", 1, 0))
            raw.close()
            self.connection.close()
        except OSError:
            pass

    def _reflect(self, q, body_wanted):
        """/reflect: the value of request header h (default Authorization)
        sent back in a response header and in the body, as is and encoded,
        framed as asked; split=N sends the head in two writes."""
        if "ms" in q:
            time.sleep(int(q["ms"][0]) / 1000.0)
        v = self.headers.get(q.get("h", ["Authorization"])[0], "")
        tok = v.split(" ", 1)[1] if " " in v else v
        vb = v.encode("latin-1")
        tb = tok.encode("latin-1")
        body = b"".join([
            b"raw=" + vb + b"\n",
            b"b64=" + base64.b64encode(vb) + b"\n",
            b"b64url=" + base64.urlsafe_b64encode(vb) + b"\n",
            b"tok64=" + base64.b64encode(tb) + b"\n",
            b"wrapped=" + base64.b64encode(b"{\"k\":\"" + tb + b"\"}") + b"\n",
            b"pct=" + urllib.parse.quote(v, safe="").encode() + b"\n",
            b"form=" + urllib.parse.quote_plus(v).encode() + b"\n",
            b"hex=" + vb.hex().encode() + b"\n",
            b"upper=" + v.upper().encode("latin-1") + b"\n",
            b"jslash=" + json.dumps(v)[1:-1].replace("/", "\\/").encode() + b"\n",
            b"juni=" + "".join(c if c.isalnum() or c in "-._~" else
                               "\\u%04x" % ord(c) for c in v).encode() + b"\n",
            b"html=" + html.escape(v).encode() + b"\n",
            b"htmlnum=" + "".join(c if c.isalnum() or c in "-._~" else
                                  "&#%d;" % ord(c) for c in v).encode() + b"\n",
            b"end\n"])
        extra = [("X-Echo", v), ("X-Echo-B64", base64.b64encode(vb).decode())]
        if "cookie" in q:
            # a session cookie made of the credential, and a harmless one
            extra.append(("Set-Cookie", "sid=" + tok + "; Path=/; Secure"))
            extra.append(("Set-Cookie", "plain=1"))
        if "ce" in q:
            extra.append(("Content-Encoding", q["ce"][0]))
        if "ge" in q:
            extra.append(("grpc-encoding", q["ge"][0]))
        chunk = int(q.get("chunk", ["0"])[0])
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if chunk > 0:
            # te=CODING: "CODING, chunked" (the bytes are not coded)
            self.send_header("Transfer-Encoding", q["te"][0] + ", chunked"
                             if "te" in q else "chunked")
        elif q.get("close", ["0"])[0] == "1":
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        for k, x in extra:
            self.send_header(k, x)
        if "split" in q:
            # the head in two writes (two TLS records, read apart): the
            # first ends split bytes in (negative: before the end)
            self._headers_buffer.append(b"\r\n")
            head = b"".join(self._headers_buffer)
            self._headers_buffer = []
            n = int(q["split"][0])
            n = n if n > 0 else len(head) + n
            self.wfile.write(head[:n])
            self.wfile.flush()
            time.sleep(0.2)
            self.wfile.write(head[n:])
        else:
            self.end_headers()
        if not body_wanted:
            return
        if chunk <= 0:
            self.wfile.write(body)
            return
        for i in range(0, len(body), chunk):
            part = body[i:i + chunk]
            self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _send(self, status, body, ctype="text/plain", extra=(), chunked=False,
              body_wanted=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Upstream", self.server.name)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if not body_wanted:
            return
        if not chunked:
            self.wfile.write(body)
            return
        for i in range(0, len(body), 65536):
            part = body[i:i + 65536]
            self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def _sigv4_check(self, digest):
        """/sigv4/..., /s3/...: 200 "sigv4 ok" when the request's SigV4
        signature is the one botocore computes with the credentials in
        STATE_DIR/aws-creds.json, and its X-Amz-Content-Sha256 is the
        SHA-256 of the body it came with (digest) or UNSIGNED-PAYLOAD;
        else 403 "sigv4 mismatch" (the canonical requests go to
        stderr)."""
        try:
            import botocore         # noqa: F401
        except ImportError:         # Debian's python3-botocore, for another python3
            sys.path.append("/usr/lib/python3/dist-packages")
        from botocore.auth import SigV4Auth, S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        try:
            with open(os.path.join(os.path.dirname(self.server.state.path),
                                   "aws-creds.json")) as f:
                c = json.load(f)
            auth = self.headers.get("Authorization", "")
            m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/"
                         r"([^/]+)/([^/]+)/aws4_request, SignedHeaders="
                         r"([^,]+), Signature=([0-9a-f]{64})$", auth)
            if not m:
                raise ValueError("no SigV4 Authorization: " + auth[:40])
            akid, _, region, service, signed, sig = m.groups()
            hdrs = {h: self.headers.get(h, "") for h in signed.split(";")}
            req = AWSRequest(method=self.command, url="https://" +
                             self.headers.get("Host", "") + self.path,
                             headers=hdrs, data=b"")
            req.context["timestamp"] = self.headers.get("X-Amz-Date", "")
            cls = S3SigV4Auth if service == "s3" else SigV4Auth
            a = cls(Credentials(c["access_key_id"], c["secret_access_key"],
                                c.get("session_token")), service, region)
            canon = a.canonical_request(req)
            want = a.signature(a.string_to_sign(req, canon), req)
            ok = akid == c["access_key_id"] and want == sig
            ph = self.headers.get("X-Amz-Content-Sha256", "")
            if ph != "UNSIGNED-PAYLOAD" and ph != digest:
                print("sigv4: payload hash %s, body %s" % (ph, digest),
                      file=sys.stderr, flush=True)
                ok = False
            if not ok:
                print("sigv4 mismatch; canonical request:\n" + canon,
                      file=sys.stderr, flush=True)
        except Exception as e:      # a test server: say what went wrong
            print("sigv4 check: %r" % e, file=sys.stderr, flush=True)
            ok = False
        body = b"sigv4 ok\n" if ok else b"sigv4 mismatch\n"
        self.send_response(200 if ok else 403)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _client_cn(self):
        """The CN of the client certificate the connection presented, or
        None."""
        if not isinstance(self.connection, ssl.SSLSocket):
            return None
        cert = self.connection.getpeercert()
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return None

    def _answer(self, body_wanted=True):
        st = self.server.state
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/upload" and "wait_ms" in q:
            # the body waits in the relay: its buffers fill up
            time.sleep(int(q["wait_ms"][0]) / 1000.0)
        digest, nbody, chunked = self._read_body()
        headers = [[k, v] for k, v in self.headers.items()]
        st.append("requests", {"method": self.command, "path": self.path,
                               "host": self.headers.get("Host", ""),
                               "headers": headers, "body_sha256": digest,
                               "body_bytes": nbody, "chunked": chunked,
                               "trailers": self.trailers,
                               "client_cn": self._client_cn()})
        if u.path == "/slow":
            time.sleep(int(q.get("ms", ["1000"])[0]) / 1000.0)
        if u.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
            return
        if u.path == "/reflect":
            self._reflect(q, body_wanted)
            return
        if u.path.startswith("/sigv4/") or u.path.startswith("/s3/"):
            self._sigv4_check(digest)
            return
        if u.path == "/reset-mid":
            frame = (b"Connection: close\r\n" if q.get("close", ["0"])[0] == "1"
                     else b"Content-Length: 1000\r\n")
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" +
                             frame + b"\r\n0123456789")
            self.wfile.flush()
            time.sleep(0.2)
            self._reset()
            return
        if u.path == "/stall":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n"
                             b"Content-Type: text/plain\r\n\r\n0123456789")
            self.wfile.flush()
            time.sleep(int(q.get("ms", ["20000"])[0]) / 1000.0)
            self.close_connection = True
            return
        if u.path == "/bad-response":
            self.wfile.write(BAD_RESPONSES[q.get("kind", ["dupcl"])[0]])
            self.close_connection = True
            return
        extra, ctype, chunked_out = [], "text/plain", False
        if u.path == "/big":
            body = b"x" * int(q.get("n", ["1048576"])[0])
        elif u.path == "/rand":
            # deterministic bytes; the header lets a client check them
            import random
            body = random.Random(q.get("seed", ["1"])[0]).randbytes(
                int(q.get("n", ["1048576"])[0]))
            extra.append(("X-Body-SHA256", hashlib.sha256(body).hexdigest()))
            chunked_out = q.get("chunked", ["0"])[0] == "1"
        elif u.path == "/echo-headers" or u.path == "/upload":
            body = (json.dumps({"method": self.command, "path": self.path,
                                "headers": headers, "sha256": digest,
                                "bytes": nbody, "chunked": chunked}) +
                    "\n").encode()
            ctype = "application/json"
            if q.get("hop", ["0"])[0] == "1":
                # hop-by-hop response headers a relay must not pass on
                extra += [("Connection", "X-Resp-Hop"),
                          ("X-Resp-Hop", "dropped"),
                          ("Keep-Alive", "timeout=5, max=100"),
                          ("Proxy-Authenticate", "Basic realm=\"up\""),
                          ("Upgrade", "h2c"),
                          ("X-Resp-Ordinary", "kept")]
        elif u.path == "/ws":
            self._send(400, b"not a websocket upgrade\n", body_wanted=body_wanted)
            return
        else:
            body = ("hello from %s\n" % self.server.name).encode()
        self._send(200, body, ctype, extra, chunked_out, body_wanted)

    def _websocket(self):
        """A minimal RFC 6455 server: accepts, echoes text and binary
        frames (unmasked, same opcode), answers ping and close."""
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(
            (key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        st = self.server.state
        while True:
            try:
                op, payload = ws_read_frame(self.rfile, masked=True)
            except (ConnectionError, OSError, ValueError):
                return
            if op == 8:
                self.wfile.write(ws_frame(8, payload[:2]))
                return
            if op == 9:
                self.wfile.write(ws_frame(10, payload))
                continue
            if op in (0, 1, 2):
                st.bump("ws_frames")
                self.wfile.write(ws_frame(op, payload))

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def do_PUT(self):
        self._answer()

    def do_DELETE(self):
        self._answer()

    def do_PATCH(self):
        self._answer()

    def do_HEAD(self):
        self._answer(False)


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# /bad-response?kind=K: answers a relay must not pass on as they are
BAD_RESPONSES = {
    "dupcl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello!!",
    "clte": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
            b"\r\n5\r\nhello\r\n0\r\n\r\n",
    "fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 5\r\n\r\nhello",
    "lf": b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello",
    "status": b"HTTP/1.1 2000 OK\r\nContent-Length: 5\r\n\r\nhello",
    "nul": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 5\r\n\r\nhello",
    # a second answer nobody asked for
    "extra": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
             b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
}


def ws_frame(op, payload, mask=False):
    """One final frame; masked (as a client sends) when mask is set."""
    n = len(payload)
    head = bytes([0x80 | op])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_read_frame(f, masked):
    """(opcode, payload) of the next frame from a binary file; a frame
    whose mask bit is not as expected is a ValueError."""
    def need(n):
        b = f.read(n)
        if len(b) < n:
            raise ConnectionError("eof")
        return b
    b0, b1 = need(2)
    n = b1 & 0x7F
    if bool(b1 & 0x80) != masked:
        raise ValueError("mask bit %d" % (b1 >> 7))
    if n == 126:
        n = struct.unpack("!H", need(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", need(8))[0]
    key = need(4) if masked else None
    payload = need(n) if n else b""
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return b0 & 0x0F, payload


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        s.settimeout(60)
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                self.server.state.bump("bytes", len(b))
                s.sendall(b)
        except OSError:
            pass


SO_ORIGINAL_DST = 80


def original_dst(s):
    if s.family == socket.AF_INET:
        raw = s.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port = struct.unpack("!H", raw[2:4])[0]
        return socket.inet_ntop(socket.AF_INET, raw[4:8]), port
    raw = s.getsockopt(socket.IPPROTO_IPV6, SO_ORIGINAL_DST, 28)
    port = struct.unpack("!H", raw[2:4])[0]
    return socket.inet_ntop(socket.AF_INET6, raw[8:24]), port


class OrigDstHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        lport = s.getsockname()[1]
        try:
            a, p = original_dst(s)
        except OSError as e:
            a, p = "none(%s)" % errno.errorcode.get(e.errno, e.errno), 0
        try:
            s.sendall(("origdst %s %d via %d\n" % (a, p, lport)).encode())
        except OSError:
            pass


def udp_thread(fam, addr, name, state, echo):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(addr)
    lport = s.getsockname()[1]

    def run():
        while True:
            data, peer = s.recvfrom(65536)
            state.bump("datagrams")
            if echo:
                s.sendto(b"udp via %d " % lport + data, peer)
    t = threading.Thread(target=run, daemon=True)
    t.start()


def cmd_serve(a):
    os.makedirs(a.state_dir, exist_ok=True)
    threads = []
    for spec in a.spec:
        name, _, rest = spec.partition("=")
        parts = rest.split(";")
        kind, listens = parts[0], parts[1].split(",")
        state = State(os.path.join(a.state_dir, name + ".json"), name, kind)
        sslctx = None
        if kind == "tls":
            sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            sslctx.load_cert_chain(parts[2], parts[3])
            if len(parts) > 4 and parts[4]:
                # mTLS: a client certificate from this CA, or no handshake
                sslctx.verify_mode = ssl.CERT_REQUIRED
                sslctx.load_verify_locations(cafile=parts[4])

            def on_sni(sslobj, sni, ctx, state=state):
                state.append("sni", sni or "")
            sslctx.sni_callback = on_sni
        for l in listens:
            fam, host, port = parse_hostport(l)
            if kind in ("udp", "udpecho"):
                udp_thread(fam, (host, port), name, state, kind == "udpecho")
                continue
            handler = {"tls": HTTPHandler, "http": HTTPHandler,
                       "echo": EchoHandler, "origdst": OrigDstHandler}[kind]
            srv = TCPServer(fam, (host, port), handler, name, state, sslctx)
            t = threading.Thread(target=srv.serve_forever, daemon=True)
            t.start()
            threads.append(t)
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("%d\n" % os.getpid())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *x: stop.set())
    signal.signal(signal.SIGINT, lambda *x: stop.set())
    while not stop.wait(1):
        pass
    return 0


# ---------------------------------------------------------------- checks

def load_states(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".json"):
            try:
                with open(os.path.join(d, fn)) as f:
                    out[fn[:-5]] = json.load(f)
            except (OSError, ValueError):
                pass
    return out


def cmd_snapshot(a):
    json.dump(load_states(a.dir), sys.stdout)
    print()
    return 0


def delta(now, before, field):
    b = before or {}
    if field in ("accepted", "handshakes", "tls_errors", "bytes", "datagrams"):
        return str(now[field] - b.get(field, 0))
    if field == "requests":
        return str(len(now["requests"]) - len(b.get("requests", [])))
    if field in ("hosts", "paths"):
        k = field[:-1]
        new = now["requests"][len(b.get("requests", [])):]
        return ",".join(r[k] for r in new)
    if field == "sni":
        new = now["sni"][len(b.get("sni", [])):]
        return ",".join(s or "-" for s in new)
    raise KeyError(field)


def cmd_expect(a):
    now = load_states(a.dir)
    with open(a.snap) as f:
        before = json.load(f)
    bad = []
    for e in " ".join(a.expr).split():
        lhs, _, want = e.partition("=")
        name, _, field = lhs.rpartition(".")
        names = sorted(now) if name == "*" else [name]
        for n in names:
            if n not in now:
                bad.append("%s: no such upstream" % n)
                continue
            try:
                got = delta(now[n], before.get(n), field)
            except KeyError:
                bad.append("%s: unknown field %s" % (lhs, field))
                continue
            if got != want:
                bad.append("%s.%s=%s (want %s)" % (n, field, got, want))
    if bad:
        print("upstream: " + "; ".join(bad))
        return 1
    return 0


def cmd_requests(a):
    """The requests server NAME recorded since SNAP, as a JSON list."""
    now = load_states(a.dir).get(a.name)
    with open(a.snap) as f:
        before = json.load(f).get(a.name) or {}
    if now is None:
        print("upstream: %s: no such upstream" % a.name, file=sys.stderr)
        return 1
    json.dump(now["requests"][len(before.get("requests", [])):], sys.stdout)
    print()
    return 0


def jtext(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def rec_matches(rec, conds):
    for k, v in conds:
        if k not in rec:
            return False
        got = jtext(rec[k])
        if v.startswith("~"):
            if not re.search(v[1:], got):
                return False
        elif got != v:
            return False
    return True


def read_records(path, offset):
    recs = []
    try:
        with open(path) as f:
            for i, line in enumerate(f):
                if i < offset or not line.strip():
                    continue
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    recs.append({"_unparsable": line.rstrip()})
    except OSError:
        pass
    return recs


def cmd_audit(a):
    wants = []
    for e in a.expect:
        conds, count = [], None
        for kv in e.split():
            if kv.startswith("#") and count is None and not conds:
                lo, _, hi = kv[1:].partition("-")
                count = (int(lo), int(hi or lo))
                continue
            k, _, v = kv.partition("=")
            conds.append((k, v))
        wants.append((e, conds, count))
    deadline = time.time() + a.timeout
    while True:
        recs = read_records(a.file, a.offset)
        used, missing = set(), []
        for e, conds, count in wants:
            if count is not None:
                n = sum(1 for r in recs if rec_matches(r, conds))
                if not count[0] <= n <= count[1]:
                    missing.append("%s (found %d)" % (e, n))
                continue
            for i, r in enumerate(recs):
                if i not in used and rec_matches(r, conds):
                    used.add(i)
                    break
            else:
                missing.append(e)
        if not missing or time.time() >= deadline:
            break
        time.sleep(0.1)
    if missing:
        print("audit: no record with {%s}; new records: %s" % (
            "}, {".join(missing),
            " | ".join(json.dumps(r, sort_keys=True) for r in recs) or "none"))
        return 1
    return 0


# ---------------------------------------------------------------- clients

def connect(hp, timeout):
    fam, host, port = parse_hostport(hp)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def classify(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    if isinstance(e, ConnectionResetError):
        return "reset"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    return "error %s" % e


def cmd_tcp(a):
    try:
        s = connect(a.addr, a.timeout)
    except OSError as e:
        print(classify(e))
        return 0
    print("connected")
    try:
        if a.wait:
            time.sleep(a.wait)
        if a.send:
            s.sendall(unescape(a.send))
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                if got:
                    print("recv %r" % got)
                print("eof")
                break
            got += b
            if a.send and len(got) >= len(unescape(a.send)):
                print("recv %r" % got)
                got = b""
                s.shutdown(socket.SHUT_WR)
    except OSError as e:
        if got:
            print("recv %r" % got)
        print(classify(e))
    s.close()
    return 0


def parse_responses(data):
    """Splits bytes into HTTP/1.1 responses (Content-Length or chunked
    bodies; anything else ends at the end of the data).  Returns
    (list of (status, headers, body), trailing bytes)."""
    out = []
    while data:
        end = data.find(b"\r\n\r\n")
        if not data.startswith(b"HTTP/") or end < 0:
            break
        lines = data[:end].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            break
        hdrs = {}
        for h in lines[1:]:
            k, _, v = h.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        rest = data[end + 4:]
        if status == 101:
            out.append((status, hdrs, b""))
            return out, rest
        if 100 <= status < 200 or status in (204, 304):
            body, data = b"", rest
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"])
            if len(rest) < n:
                break
            body, data = rest[:n], rest[n:]
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            body, pos = b"", 0
            while True:
                eol = rest.find(b"\r\n", pos)
                if eol < 0:
                    return out, data
                n = int(rest[pos:eol].split(b";")[0], 16)
                if n == 0:
                    pos = rest.find(b"\r\n", eol + 2) + 2
                    break
                body += rest[eol + 2:eol + 2 + n]
                pos = eol + 2 + n + 2
            data = rest[pos:]
        else:
            body, data = rest, b""
        out.append((status, hdrs, body))
    return out, data


def read_all(s):
    """Reads until end of stream; returns (bytes, how it ended)."""
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return got, "eof"
            got += b
    except OSError as e:
        return got, classify(e)


def tls_wrap(s, name, ca):
    """s wrapped in TLS to name, verified against ca, ALPN http/1.1."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=name)


def read_responses(s, want, linger):
    """Reads until end of stream, or until want responses (0: no limit)
    are complete and then linger seconds passed without the end; returns
    (bytes, how it ended: eof | reset | timeout | open | error ...)."""
    got = b""
    try:
        while True:
            if want and len(parse_responses(got)[0]) >= want:
                s.settimeout(linger)
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    return got, "open"
            else:
                b = s.recv(65536)
            if not b:
                return got, "eof"
            got += b
    except ssl.SSLError as e:
        return got, "tls-error %s" % e.reason
    except OSError as e:
        return got, classify(e)


def raw_one(a, send, out):
    """One raw exchange (see cmd_raw); each line of output goes to out()."""
    try:
        s = connect(a.addr, a.timeout)
        if a.tls_name:
            s = tls_wrap(s, a.tls_name, a.ca)
    except OSError as e:
        out({"end": classify(e)} if a.json else classify(e))
        return
    if not a.json:
        out("connected")
    end = None
    try:
        if a.wait:
            time.sleep(a.wait)
        s.sendall(unescape(send))
        if a.close and not a.tls_name:
            s.shutdown(socket.SHUT_WR)
    except OSError as e:
        end = classify(e)
    got, how = read_responses(s, a.responses, a.linger)
    resps, rest = parse_responses(got)
    for i, (status, hdrs, body) in enumerate(resps, 1):
        if a.json:
            out({"n": i, "status": status, "headers": hdrs,
                 "body": body.decode("latin-1")})
        else:
            out("%d: status=%d upstream=%s body=%r" % (
                i, status, hdrs.get("x-upstream", "-"), body))
    if rest:
        out({"trailing": rest.decode("latin-1")} if a.json else
            "trailing %r" % rest)
    out({"end": end or how} if a.json else end or how)
    s.close()


def cmd_raw(a):
    if not a.batch:
        if a.send is None:
            print("upstream.py raw: --send or --batch", file=sys.stderr)
            return 2
        raw_one(a, a.send, lambda x: print(json.dumps(x) if a.json else x))
        return 0
    # --batch: one exchange a line ("ID<TAB>SEND"), all at once, each in
    # its own thread; output lines are JSON with "id" (--json implied)
    a.json = True
    lock = threading.Lock()
    threads = []
    with open(a.batch) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            ident, _, send = line.partition("\t")

            def out(x, ident=ident):
                x = dict(x, id=ident)
                with lock:
                    print(json.dumps(x), flush=True)
            t = threading.Thread(target=raw_one, args=(a, send, out))
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    return 0


def cmd_ws(a):
    """A WebSocket client over TLS: the upgrade, then each --msg as a
    masked text frame (and --big BYTES as one more), each echo awaited."""
    key = base64.b64encode(os.urandom(16)).decode()
    try:
        s = tls_wrap(connect(a.addr, a.timeout), a.tls_name, a.ca)
    except OSError as e:
        print("connect " + classify(e))
        return 0
    f = s.makefile("rb")
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: %s\r\n\r\n" % (
                   a.path, a.host or a.tls_name, key)).encode())
    try:
        status, hdrs, body = read_response(f, a.timeout)
    except (OSError, ValueError) as e:
        print("status error %s" % e)
        return 0
    if status is None:
        print("status eof")
        return 0
    print("status=%d" % status)
    if status != 101:
        print("body=%r" % body)
        try:
            print("then " + ("eof" if s.recv(1) == b"" else "data"))
        except OSError as e:
            print("then " + classify(e))
        return 0
    want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    print("accept=%s" % ("ok" if hdrs.get("sec-websocket-accept") == want else
                         "bad %r" % hdrs.get("sec-websocket-accept")))
    msgs = [m.encode() for m in a.msg]
    if a.big:
        msgs.append(bytes(0x41 + i % 26 for i in range(a.big)))
    for i, m in enumerate(msgs, 1):
        try:
            s.sendall(ws_frame(1, m, mask=True))
            op, payload = ws_read_frame(f, masked=False)
        except (OSError, ValueError) as e:
            print("%d: %s" % (i, classify(e) if isinstance(e, OSError) else e))
            return 0
        print("%d: %s len=%d" % (i, "echo" if (op, payload) == (1, m) else
                                 "bad op=%d %r" % (op, payload[:40]), len(payload)))
    try:
        s.sendall(ws_frame(8, struct.pack("!H", 1000), mask=True))
        op, payload = ws_read_frame(f, masked=False)
        print("close op=%d" % op)
    except (OSError, ValueError) as e:
        print("close %s" % e)
    s.close()
    return 0


def cmd_watch(a):
    """An HTTPS connection held open: GET PATH/first, then the file READY;
    each time the file GO appears, GET PATH/again on the same connection
    (GO is removed, GO.done created); when the peer closes the
    connection, "closed eof|reset|tls-error TIME" and the end.  Prints
    "first STATUS", "again STATUS" (or eof, error ...)."""
    def get(what):
        s.sendall(("GET %s/%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (
            a.path, what, a.tls_name)).encode())
        status, hdrs, body = read_response(f, a.timeout)
        return "eof" if status is None else str(status)
    try:
        s = tls_wrap(connect(a.addr, a.timeout), a.tls_name, a.ca)
        f = s.makefile("rb")
        print("first " + get("first"), flush=True)
    except (OSError, ValueError) as e:
        print("first error %s" % e, flush=True)
        return 0
    open(a.ready, "w").close()
    deadline = time.time() + a.hold
    while time.time() < deadline:
        if os.path.exists(a.go):
            os.unlink(a.go)
            try:
                print("again " + get("again"), flush=True)
            except (OSError, ValueError) as e:
                print("again error %s" % e, flush=True)
            open(a.go + ".done", "w").close()
            continue
        if s.pending() or select.select([s], [], [], 0.02)[0]:
            try:
                how = "data" if s.recv(1) else "eof"
            except ssl.SSLError:
                how = "tls-error"
            except ConnectionResetError:
                how = "reset"
            except OSError:
                how = "error"
            print("closed %s %.6f" % (how, time.time()), flush=True)
            return 0
    print("closed timeout", flush=True)
    return 0


def ext(typ, body):
    return struct.pack("!HH", typ, len(body)) + body


def client_hello(sni=None, alpn=(), pad=0):
    """A ClientHello record as a TLS 1.3 client sends it (one record)."""
    exts = b""
    if sni:
        n = sni.encode("utf-8")
        entry = b"\x00" + struct.pack("!H", len(n)) + n
        exts += ext(0, struct.pack("!H", len(entry)) + entry)
    exts += ext(10, b"\x00\x04\x00\x1d\x00\x17")            # groups
    exts += ext(13, b"\x00\x06\x04\x03\x08\x04\x04\x01")    # sig algs
    exts += ext(43, b"\x04\x03\x04\x03\x03")                 # versions
    exts += ext(51, b"\x00\x24\x00\x1d\x00\x20" + os.urandom(32))  # key share
    if alpn:
        lst = b"".join(bytes([len(p)]) + p.encode() for p in alpn)
        exts += ext(16, struct.pack("!H", len(lst)) + lst)
    if pad:
        exts += ext(21, b"\x00" * pad)
    suites = b"\x13\x01\x13\x02\x13\x03\xc0\x2b\xc0\x2f"
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) +
            struct.pack("!H", len(suites)) + suites + b"\x01\x00" +
            struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


ALERTS = {0: "close_notify", 10: "unexpected_message", 40: "handshake_failure",
          47: "illegal_parameter", 49: "access_denied", 50: "decode_error",
          70: "protocol_version", 80: "internal_error",
          112: "unrecognized_name"}


def cmd_hello(a):
    hello = client_hello(a.sni, [p for p in a.alpn.split(",") if p], a.pad)
    if a.cut:
        hello = hello[:a.cut]
    try:
        s = connect(a.addr, a.timeout)
    except OSError as e:
        print(classify(e))
        return 0
    print("connected")
    t0 = None
    end = None
    try:
        if a.wait:
            time.sleep(a.wait)
        t0 = time.time()
        s.sendall(hello)
        print("hello %d" % len(hello))
    except OSError as e:
        end = classify(e)
    got, how = b"", None
    while end is None and how is None:
        try:
            b = s.recv(65536)
        except OSError as e:
            how = classify(e)
            break
        if not b:
            how = "eof"
        got += b
        while len(got) >= 5 and len(got) >= 5 + struct.unpack("!H", got[3:5])[0]:
            typ, n = got[0], struct.unpack("!H", got[3:5])[0]
            rec, got = got[5:5 + n], got[5 + n:]
            if typ == 21 and len(rec) == 2:
                print("alert %s %s" % (
                    {1: "warning", 2: "fatal"}.get(rec[0], rec[0]),
                    ALERTS.get(rec[1], rec[1])))
            elif typ == 22 and rec[:1] == b"\x02":
                print("server-hello")
                how = "closed by us"    # the upstream answered: enough
                break
            else:
                print("recv %r" % (bytes([typ]) + rec))
    if got and how != "closed by us":
        print("recv %r" % got)
    print(end or how)
    if t0 is not None:
        print("elapsed=%d" % int(time.time() - t0))
    s.close()
    return 0


def read_response(f, timeout=None):
    line = f.readline()
    if not line:
        return None, None, b""
    status = int(line.split()[1])
    hdrs = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if 100 <= status < 200 or status in (204, 304):
        body = b""
    elif "content-length" in hdrs:
        body = f.read(int(hdrs["content-length"]))
    elif hdrs.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                f.readline()
                break
            body += f.read(n)
            f.readline()
    else:
        body = f.read()
    return status, hdrs, body


def cmd_http_seq(a):
    try:
        s = connect(a.addr, a.timeout)
        if a.tls_name:
            ctx = ssl.create_default_context(cafile=a.ca)
            s = ctx.wrap_socket(s, server_hostname=a.tls_name)
    except OSError as e:
        print("0: " + classify(e))
        return 0
    f = s.makefile("rb")
    for i, h in enumerate(a.hosts, 1):
        req = "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-test\r\n\r\n" % (a.path, h)
        try:
            s.sendall(req.encode())
            status, hdrs, body = read_response(f)
        except OSError as e:
            print("%d: %s" % (i, classify(e)))
            break
        if status is None:
            print("%d: eof" % i)
            break
        print("%d: status=%d upstream=%s body=%r" % (
            i, status, hdrs.get("x-upstream", "-"), body))
    s.close()
    return 0


def cmd_hold(a):
    def trip(s, msg):
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(65536)
            if not b:
                return "eof after %r" % got
            got += b
        return "ok" if got == msg else "bad %r" % got

    def https_trip(s, msg):
        s.sendall(("GET /hold/%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (
            msg.decode().strip(), a.tls_name)).encode())
        status, hdrs, body = read_response(rf)
        if status is None:
            return "eof"
        return "ok" if status == 200 else "status %d" % status
    rf = None
    try:
        s = connect(a.addr, a.timeout)
        if a.tls_name:
            ctx = ssl.create_default_context(cafile=a.ca)
            s = ctx.wrap_socket(s, server_hostname=a.tls_name)
            rf = s.makefile("rb")
            trip = https_trip
        print("first " + trip(s, b"first\n"), flush=True)
    except OSError as e:
        print("first " + classify(e))
        return 0
    with open(a.ready, "w") as f:
        f.write("held\n")
    deadline = time.time() + 30
    while not os.path.exists(a.go) and time.time() < deadline:
        time.sleep(0.05)
    try:
        print("second " + trip(s, b"second\n"))
    except OSError as e:
        print("second " + classify(e))
    s.close()
    return 0


# ---------------------------------------------------------------- DNS

QTYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15,
          "TXT": 16, "AAAA": 28, "SRV": 33, "OPT": 41, "SVCB": 64,
          "HTTPS": 65, "ANY": 255}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN",
          4: "NOTIMP", 5: "REFUSED"}


def dns_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\x00"


def dns_query(qid, name, qtype="A", qdcount=1):
    """A query as a stub resolver sends it (RD set, no EDNS)."""
    q = dns_name(name) + struct.pack("!HH", QTYPES.get(qtype.upper(), 1), 1)
    return struct.pack("!HHHHHH", qid, 0x0100, qdcount, 0, 0, 0) + q * qdcount


def dns_bad(kind, qid):
    """Malformed queries, each one rule of the parser broken."""
    if kind == "random":
        # fixed bytes (seeded), so a failure can be replayed
        import random
        r = random.Random(3)
        return struct.pack("!H", qid) + bytes(r.randrange(256) for _ in range(40))
    if kind == "qdcount2":
        return dns_query(qid, "allowed.test", "A", qdcount=2)
    if kind == "qdcount0":
        return struct.pack("!HHHHHH", qid, 0x0100, 0, 0, 0, 0)
    hdr = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    tail = struct.pack("!HH", 1, 1)
    if kind == "ptr":           # "allowed" then a pointer back to itself
        return hdr + b"\x07allowed\xc0\x0c" + tail
    if kind == "ptrfwd":        # a pointer forward, past the question
        return hdr + b"\x07allowed\xc0\x1a" + tail + b"\x04test\x00"
    if kind == "short":         # a label longer than the message
        return hdr + b"\x3fallowed"
    if kind == "response":      # QR set: an answer, not a query
        return struct.pack("!HHHHHH", qid, 0x8100, 1, 0, 0, 0) + \
            dns_name("allowed.test") + tail
    if kind == "chaos":         # class CH
        return hdr + dns_name("allowed.test") + struct.pack("!HH", 1, 3)
    if kind == "label64":       # a label of 64 bytes
        return hdr + b"\x40" + b"a" * 64 + dns_name("allowed.test") + tail
    if kind == "name256":       # 256 bytes once written out
        return hdr + (b"\x3f" + b"a" * 63) * 3 + b"\x39" + b"a" * 57 + \
            dns_name("test") + tail
    if kind == "twoopt":        # two OPT records
        opt = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)
        return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 2) + \
            dns_name("allowed.test") + tail + opt + opt
    if kind == "trailing":      # bytes after the question
        return hdr + dns_name("allowed.test") + tail + b"\x00\x00"
    raise ValueError("unknown bad:%s" % kind)


def dns_skip_name(m, off):
    while True:
        n = m[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def dns_read_name(m, off, depth=0):
    labels = []
    while depth < 20:
        n = m[off]
        if n == 0:
            break
        if n & 0xC0 == 0xC0:
            ptr = struct.unpack("!H", m[off:off + 2])[0] & 0x3FFF
            return ".".join(labels + [dns_read_name(m, ptr, depth + 1)]).strip(".")
        labels.append(m[off + 1:off + 1 + n].decode("latin-1"))
        off += 1 + n
    return ".".join(labels)


def dns_describe(m):
    """'RCODE [tc] an=N TYPE=DATA ...' for a response."""
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", m[:12])
    words = [RCODES.get(flags & 15, "rcode%d" % (flags & 15))]
    if flags & 0x0200:
        words.append("tc")
    words.append("an=%d" % an)
    off = 12
    for _ in range(qd):
        off = dns_skip_name(m, off) + 4
    names = {v: k for k, v in QTYPES.items()}
    for _ in range(an):
        off = dns_skip_name(m, off)
        typ, cls, ttl, rdlen = struct.unpack("!HHIH", m[off:off + 10])
        off += 10
        rd = m[off:off + rdlen]
        if typ == 1 and rdlen == 4:
            data = socket.inet_ntop(socket.AF_INET, rd)
        elif typ == 28 and rdlen == 16:
            data = socket.inet_ntop(socket.AF_INET6, rd)
        elif typ == 5:
            data = dns_read_name(m, off)
        else:
            data = rd.hex()
        words.append("%s=%s" % (names.get(typ, "type%d" % typ), data))
        off += rdlen
    return " ".join(words)


def dns_build(msg, qid):
    if msg.startswith("bad:"):
        return dns_bad(msg[4:], qid)
    name, _, qtype = msg.partition("/")
    return dns_query(qid, name, qtype or "A")


def tcp_read_msg(s):
    """One length-prefixed message; EOFError at the end of the stream."""
    def need(n):
        got = b""
        while len(got) < n:
            b = s.recv(n - len(got))
            if not b:
                raise EOFError
            got += b
        return got
    return need(struct.unpack("!H", need(2))[0])


def dns_result(i, r, tcp):
    try:
        # no EDNS in our queries: 512 bytes is all a UDP answer may take
        return "%d: %s size=%d%s" % (i, dns_describe(r), len(r),
                                     " oversize" if not tcp and len(r) > 512 else "")
    except (IndexError, struct.error, UnicodeError):
        return "%d: unparsable %r" % (i, r)


def cmd_dns(a):
    """One message after the other, over one UDP socket or one TCP
    connection; prints "N: RCODE an=K TYPE=DATA ..." or "N: timeout",
    "N: eof", "N: reset", "N: badid" (an answer to another id) and, for
    TCP messages after the connection ended, "N: closed".  TCP only:
    --pipeline writes all messages at once and matches the answers by id
    (printed in the order of the messages); --dribble writes each message
    one byte at a time."""
    fam, host, port = parse_hostport(a.addr)
    s = socket.socket(fam, socket.SOCK_STREAM if a.tcp else socket.SOCK_DGRAM)
    s.settimeout(a.timeout)
    try:
        s.connect((host, port))
    except OSError as e:
        print("0: " + classify(e))
        return 0
    base = struct.unpack("!H", os.urandom(2))[0]
    msgs = [((base + i) & 0xFFFF, dns_build(m, (base + i) & 0xFFFF))
            for i, m in enumerate(a.msg)]
    if a.tcp and a.pipeline:
        s.sendall(b"".join(struct.pack("!H", len(m)) + m for _, m in msgs))
        got, end = {}, None
        try:
            while len(got) < len(msgs):
                r = tcp_read_msg(s)
                if len(r) >= 2:
                    got[struct.unpack("!H", r[:2])[0]] = r
        except EOFError:
            end = "eof"
        except OSError as e:
            end = classify(e)
        for i, (qid, _) in enumerate(msgs, 1):
            print(dns_result(i, got[qid], True) if qid in got else
                  "%d: %s" % (i, end))
        s.close()
        return 0
    ended = False
    for i, (qid, m) in enumerate(msgs, 1):
        if ended:
            print("%d: closed" % i)
            continue
        try:
            if a.tcp:
                w = struct.pack("!H", len(m)) + m
                if a.dribble:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    for k in range(len(w)):
                        s.sendall(w[k:k + 1])
                        time.sleep(0.002)
                else:
                    s.sendall(w)
                r = tcp_read_msg(s)
            else:
                s.send(m)
                r = s.recv(65535)
        except EOFError:
            print("%d: eof" % i)
            ended = True
            continue
        except OSError as e:
            print("%d: %s" % (i, classify(e)))
            if a.tcp and not isinstance(e, socket.timeout):
                ended = True
            continue
        if len(r) < 12 or struct.unpack("!H", r[:2])[0] != qid:
            print("%d: badid %r" % (i, r[:12]))
            continue
        print(dns_result(i, r, a.tcp))
    s.close()
    return 0


def cmd_dnsflood(a):
    """--count queries for NAME over one UDP socket at --rate a second;
    prints the rcodes counted ("NOERROR=N", ...), "none=N" for queries
    without an answer, and "refused: none|some|most|all", "answered: ...".
    """
    fam, host, port = parse_hostport(a.addr)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.connect((host, port))
    s.setblocking(False)
    sent, got = {}, {}
    base = struct.unpack("!H", os.urandom(2))[0]
    t0 = time.time()

    def drain(until):
        while True:
            left = until - time.time()
            if left <= 0:
                return
            r, _, _ = select.select([s], [], [], left)
            if not r:
                return
            try:
                m = s.recv(65535)
            except OSError:
                continue
            if len(m) >= 12:
                qid = struct.unpack("!H", m[:2])[0]
                if qid in sent and qid not in got:
                    got[qid] = RCODES.get(m[3] & 15, "rcode%d" % (m[3] & 15))
    for i in range(a.count):
        qid = (base + i) & 0xFFFF
        sent[qid] = i
        try:
            s.send(dns_query(qid, a.name, a.type))
        except OSError:
            pass
        drain(t0 + (i + 1) / float(a.rate))
    drain(time.time() + min(a.timeout, 1.0))
    counts = {}
    for v in got.values():
        counts[v] = counts.get(v, 0) + 1
    print("sent=%d" % len(sent))
    for k in sorted(counts):
        print("%s=%d" % (k, counts[k]))
    print("none=%d" % (len(sent) - len(got)))

    def qual(n):
        if n == 0 or n == len(sent):
            return "none" if n == 0 else "all"
        return "most" if 2 * n > len(sent) else "some"
    print("refused: " + qual(counts.get("REFUSED", 0)))
    print("answered: " + qual(counts.get("NOERROR", 0)))
    print("elapsed=%.1f" % (time.time() - t0))
    return 0


def cmd_conns(a):
    """--count TCP connections opened at once and held --hold seconds
    without a byte sent; prints "open=K failed=F" (connections completed,
    connects that failed; it gives up after 10) and, at the end,
    "closed-by-peer=K" (ended meanwhile) and "kept=K" (still open)."""
    import resource
    want = a.count + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, soft), max(want, hard)))
    fam, host, port = parse_hostport(a.addr)
    ss, failed = [], 0
    for _ in range(a.count):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(max(a.timeout, 3))     # a SYN retransmit takes 1 s
        try:
            s.connect((host, port))
        except OSError:
            s.close()
            failed += 1
            if failed >= 10:
                break
            continue
        ss.append(s)
    print("open=%d failed=%d" % (len(ss), failed), flush=True)
    time.sleep(a.hold)
    gone = 0
    for s in ss:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                gone += 1
        except BlockingIOError:
            pass
        except OSError:
            gone += 1
        s.close()
    print("closed-by-peer=%d" % gone)
    print("kept=%d" % (len(ss) - gone))
    return 0


def cmd_udp(a):
    fam, host, port = parse_hostport(a.addr)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(a.timeout)
    try:
        s.sendto(unescape(a.send), (host, port))
        data, _ = s.recvfrom(65536)
        print("reply %r" % data)
    except OSError as e:
        print(classify(e))
    return 0


def main():
    p = argparse.ArgumentParser(description="sluice test servers and clients")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--state-dir", required=True)
    s.add_argument("--ready")
    s.add_argument("spec", nargs="+")
    s.set_defaults(fn=cmd_serve)
    s = sub.add_parser("snapshot")
    s.add_argument("dir")
    s.set_defaults(fn=cmd_snapshot)
    s = sub.add_parser("expect")
    s.add_argument("dir")
    s.add_argument("snap")
    s.add_argument("expr", nargs="+")
    s.set_defaults(fn=cmd_expect)
    s = sub.add_parser("requests")
    s.add_argument("dir")
    s.add_argument("snap")
    s.add_argument("name")
    s.set_defaults(fn=cmd_requests)
    s = sub.add_parser("audit")
    s.add_argument("file")
    s.add_argument("offset", type=int)
    s.add_argument("--expect", action="append", required=True)
    s.add_argument("--timeout", type=float, default=3)
    s.set_defaults(fn=cmd_audit)
    s = sub.add_parser("tcp")
    s.add_argument("addr")
    s.add_argument("--send", default="")
    s.add_argument("--wait", type=float, default=0)
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_tcp)
    s = sub.add_parser("raw")
    s.add_argument("addr")
    s.add_argument("--send")
    s.add_argument("--batch")
    s.add_argument("--wait", type=float, default=0)
    s.add_argument("--close", action="store_true")
    s.add_argument("--timeout", type=float, default=5)
    s.add_argument("--tls-name")
    s.add_argument("--ca")
    s.add_argument("--responses", type=int, default=0)
    s.add_argument("--linger", type=float, default=0.3)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_raw)
    s = sub.add_parser("ws")
    s.add_argument("addr")
    s.add_argument("--tls-name", required=True)
    s.add_argument("--ca", required=True)
    s.add_argument("--path", default="/ws")
    s.add_argument("--host")
    s.add_argument("--msg", action="append", default=[])
    s.add_argument("--big", type=int, default=0)
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_ws)
    s = sub.add_parser("watch")
    s.add_argument("addr")
    s.add_argument("--tls-name", required=True)
    s.add_argument("--ca", required=True)
    s.add_argument("--path", default="/watch")
    s.add_argument("--ready", required=True)
    s.add_argument("--go", required=True)
    s.add_argument("--hold", type=float, default=60)
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_watch)
    s = sub.add_parser("hello")
    s.add_argument("addr")
    s.add_argument("--sni")
    s.add_argument("--alpn", default="")
    s.add_argument("--pad", type=int, default=0)
    s.add_argument("--cut", type=int, default=0)
    s.add_argument("--wait", type=float, default=0)
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_hello)
    s = sub.add_parser("http-seq")
    s.add_argument("addr")
    s.add_argument("hosts", nargs="+")
    s.add_argument("--path", default="/")
    s.add_argument("--tls-name")
    s.add_argument("--ca")
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_http_seq)
    s = sub.add_parser("hold")
    s.add_argument("addr")
    s.add_argument("--tls-name")
    s.add_argument("--ca")
    s.add_argument("--ready", required=True)
    s.add_argument("--go", required=True)
    s.add_argument("--timeout", type=float, default=5)
    s.set_defaults(fn=cmd_hold)
    s = sub.add_parser("dns")
    s.add_argument("addr")
    s.add_argument("msg", nargs="+")
    s.add_argument("--tcp", action="store_true")
    s.add_argument("--pipeline", action="store_true")
    s.add_argument("--dribble", action="store_true")
    s.add_argument("--timeout", type=float, default=1)
    s.set_defaults(fn=cmd_dns)
    s = sub.add_parser("dnsflood")
    s.add_argument("addr")
    s.add_argument("name")
    s.add_argument("--type", default="A")
    s.add_argument("--count", type=int, default=100)
    s.add_argument("--rate", type=float, default=100)
    s.add_argument("--timeout", type=float, default=1)
    s.set_defaults(fn=cmd_dnsflood)
    s = sub.add_parser("conns")
    s.add_argument("addr")
    s.add_argument("--count", type=int, default=100)
    s.add_argument("--hold", type=float, default=3)
    s.add_argument("--timeout", type=float, default=1)
    s.set_defaults(fn=cmd_conns)
    s = sub.add_parser("udp")
    s.add_argument("addr")
    s.add_argument("--send", default="x")
    s.add_argument("--timeout", type=float, default=2)
    s.set_defaults(fn=cmd_udp)
    a = p.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
