#!/usr/bin/env python3
"""tokenep.py: a test token endpoint for sluice's minted tokens (issue 19),
as tests/integ/tokens.sh runs it in the upstream namespace.  Python 3
standard library, and python3-cryptography for the signatures (Debian's,
from /usr/lib/python3/dist-packages, when the python3 running this is
another one).

  tokenep.py serve --config FILE --issued FILE [--ready FILE] LISTEN...
  tokenep.py deps          exit 0 when what serve needs can be imported

LISTEN is ADDR:PORT;CERT;KEY (ADDR 1.2.3.4 or [fd00::1]): TLS, then
HTTP/1.1, each connection in its own thread.

The config (JSON) names the clients the endpoint knows, by id:

  {"clients": {
     ID: {"grant": "client_credentials", "secret": S,
          ["scope": SCOPE,] ["expires_in": N,] ["delay_ms": MS]},
     ID: {"grant": "refresh_token", "refresh_token": R, ...},
     ID: {"grant": "jwt_bearer", "pub": PEMFILE, "alg": "ES256"|"RS256",
          "aud": AUD, ...},
     APP_ID: {"grant": "github_app", "pub": PEMFILE, "installation": N,
          ["expires_in": N]}}}

  POST /oauth/token (application/x-www-form-urlencoded)
    grant_type=client_credentials [&scope=]: the client in HTTP Basic
        (RFC 6749 2.3.1: id and secret form-encoded, then base64); a
        wrong secret gets 401 {"error": "invalid_client"}
    grant_type=refresh_token&refresh_token=R&client_id=ID [&scope=]: a
        wrong refresh token gets 400 {"error": "invalid_grant"}
    grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWS
        [&scope=] (RFC 7523): the JWS verified with the client's public key
        (its alg must be the client's), iss = sub = ID, aud = the client's
        aud, iat within a minute of now, 0 < exp - iat <= 600, exp in the
        future, a jti never seen before; else 400 {"error": "invalid_grant"}
    A scope must be the client's (else 400 invalid_scope; none when the
    client has none).  Answer: 200 {"access_token", "token_type": "Bearer",
    "expires_in"} (default 3600), after delay_ms.
  POST /app/installations/N/access_tokens (GitHub App): Authorization:
    Bearer JWT, RS256, verified with the app's key (the app named by iss),
    iat in the past by at most 2 minutes, exp in the future, exp - iat <=
    600; X-GitHub-Api-Version: 2022-11-28; no body.  Answer: 201 {"token",
    "expires_at": "YYYY-MM-DDTHH:MM:SSZ", ...}; else 401 {"message"}.
  GET /count: {"attempts": {ID: N}, "issued": {ID: N}, "rejected": {ID:
    [REASON...]}, "last": {ID: {"alg", "scope", "aud", "path", "ctype",
    "connection"}}, "tls_errors": N, "handshakes": N} -- ID "?" for a
    request that named no client.  Never a value.

Every token is random (and holds "-._~+/="); each one issued is appended to
the --issued file as a JSON line {"client", "token", "n", "at"} so that the
test knows what to look for upstream and in its leak scan.  Nothing secret
goes to standard error: one line a request, "ok"/"rejected" and why.
"""

import argparse
import base64
import binascii
import datetime
import json
import os
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import http.server
import urllib.parse


def import_crypto():
    try:
        import cryptography     # noqa: F401
    except ImportError:         # Debian's python3-cryptography, for another python3
        sys.path.append("/usr/lib/python3/dist-packages")
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import \
        encode_dss_signature
    return {"InvalidSignature": InvalidSignature, "hashes": hashes,
            "serialization": serialization, "ec": ec, "padding": padding,
            "rsa": rsa, "encode_dss_signature": encode_dss_signature}


JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url_decode(s):
    s = s.encode() if isinstance(s, str) else s
    if b"=" in s or not s.replace(b"-", b"").replace(b"_", b"").isalnum():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))


def new_token(prefix):
    """Random, with the characters redaction must cope with."""
    r = base64.b64encode(os.urandom(12)).decode()
    u = base64.urlsafe_b64encode(os.urandom(9)).decode()
    return "%s-%s-._~+/=%s" % (prefix, r.rstrip("="), u)


class Reject(Exception):
    def __init__(self, status, error, why, client="?"):
        super().__init__(why)
        self.status, self.error, self.why, self.client = status, error, why, client


class Endpoint:
    """What the handlers share: the clients, the counts, the issued file."""

    def __init__(self, config, issued_path, crypto):
        self.c = crypto
        self.clients = config["clients"]
        self.keys = {}
        for cid, cl in self.clients.items():
            if "pub" in cl:
                with open(cl["pub"], "rb") as f:
                    self.keys[cid] = self.c["serialization"].load_pem_public_key(f.read())
        self.issued_path = issued_path
        self.lock = threading.Lock()
        self.attempts, self.issued, self.rejected, self.last = {}, {}, {}, {}
        self.tls_errors = self.handshakes = 0
        self.jtis = set()

    def bump(self, what, client, n=1):
        with self.lock:
            d = getattr(self, what)
            d[client] = d.get(client, 0) + n

    def reject(self, client, why):
        with self.lock:
            self.rejected.setdefault(client, []).append(why)

    def note(self, client, **kw):
        with self.lock:
            self.last.setdefault(client, {}).update(kw)

    def issue(self, client):
        tok = new_token(client.split("-")[0][:6] or "t")
        with self.lock:
            n = self.issued.get(client, 0) + 1
            self.issued[client] = n
            with open(self.issued_path, "a") as f:
                f.write(json.dumps({"client": client, "token": tok, "n": n,
                                    "at": time.time()}) + "\n")
                f.flush()
        return tok

    def counts(self):
        with self.lock:
            return {"attempts": dict(self.attempts), "issued": dict(self.issued),
                    "rejected": {k: list(v) for k, v in self.rejected.items()},
                    "last": {k: dict(v) for k, v in self.last.items()},
                    "tls_errors": self.tls_errors,
                    "handshakes": self.handshakes}

    # ---- JWS

    def verify_jws(self, client, jws, want_alg):
        """The claims of compact JWS jws, verified with client's key."""
        parts = jws.split(".")
        if len(parts) != 3:
            raise ValueError("not a compact JWS")
        head = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
        if not isinstance(head, dict) or not isinstance(claims, dict):
            raise ValueError("header or claims not an object")
        if head.get("alg") != want_alg:
            raise ValueError("alg %r, want %s" % (head.get("alg"), want_alg))
        if head.get("typ", "JWT") != "JWT":
            raise ValueError("typ %r" % head.get("typ"))
        key = self.keys.get(client)
        if key is None:
            raise ValueError("no key for %s" % client)
        data = (parts[0] + "." + parts[1]).encode()
        c = self.c
        try:
            if want_alg == "ES256":
                if not isinstance(key, c["ec"].EllipticCurvePublicKey) or \
                        key.curve.name != "secp256r1":
                    raise ValueError("the client's key is not P-256")
                if len(sig) != 64:
                    raise ValueError("an ES256 signature of %d bytes" % len(sig))
                der = c["encode_dss_signature"](int.from_bytes(sig[:32], "big"),
                                                int.from_bytes(sig[32:], "big"))
                key.verify(der, data, c["ec"].ECDSA(c["hashes"].SHA256()))
            elif want_alg == "RS256":
                if not isinstance(key, c["rsa"].RSAPublicKey):
                    raise ValueError("the client's key is not RSA")
                key.verify(sig, data, c["padding"].PKCS1v15(), c["hashes"].SHA256())
            else:
                raise ValueError("alg %s unknown here" % want_alg)
        except c["InvalidSignature"]:
            raise ValueError("bad signature")
        return head, claims


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sluice-test-tokenep"
    timeout = 20
    tls_failed = False

    def setup(self):
        self.request.settimeout(self.timeout)
        ep = self.server.ep
        try:
            self.request = self.server.sslctx.wrap_socket(self.request, server_side=True)
            with ep.lock:
                ep.handshakes += 1
        except (ssl.SSLError, OSError) as e:
            with ep.lock:
                ep.tls_errors += 1
            log("tls error on %s: %s" % (self.server.label, e))
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
        try:
            self.request.close()
        except OSError:
            pass

    def log_message(self, fmt, *args):
        pass

    def _json(self, status, obj, extra=()):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        if self.headers.get("Transfer-Encoding"):
            raise Reject(400, "invalid_request", "a Transfer-Encoding")
        n = int(self.headers.get("Content-Length") or 0)
        if n > 65536:
            raise Reject(400, "invalid_request", "a body of %d bytes" % n)
        b = self.rfile.read(n) if n else b""
        if len(b) != n:
            raise ConnectionError("short body")
        return b

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == "/count":
            self._json(200, self.server.ep.counts())
            return
        self._json(404, {"error": "not_found"})

    def do_POST(self):
        ep = self.server.ep
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self._body()
        except (ValueError, Reject):
            self.close_connection = True
            self._json(400, {"error": "invalid_request"})
            return
        try:
            if path == "/oauth/token":
                status, obj, client = self._oauth(body)
            elif path.startswith("/app/installations/") and path.endswith("/access_tokens"):
                status, obj, client = self._github(path, body)
            else:
                raise Reject(404, "not_found", "no such path %s" % path)
        except Reject as r:
            ep.reject(r.client, r.why)
            log("rejected %s %s: %s" % (r.client, path, r.why))
            extra = [("WWW-Authenticate", 'Basic realm="tokenep"')] if r.status == 401 else []
            if r.error == "github":
                self._json(r.status, {"message": r.why}, extra)
            else:
                self._json(r.status, {"error": r.error,
                                      "error_description": r.why}, extra)
            return
        log("ok %s %s" % (client, path))
        self._json(status, obj)

    # ---- OAuth

    def _note(self, client, **kw):
        kw.update(path=self.path, ctype=self.headers.get("Content-Type"),
                  connection=self.headers.get("Connection"),
                  host=self.headers.get("Host"))
        self.server.ep.note(client, **kw)

    def _oauth(self, body):
        ep = self.server.ep
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            form = urllib.parse.parse_qsl(body.decode("ascii"), keep_blank_values=True,
                                          strict_parsing=bool(body))
        except (UnicodeDecodeError, ValueError):
            raise Reject(400, "invalid_request", "the body is no form")
        names = [k for k, _ in form]
        if len(set(names)) != len(names):
            raise Reject(400, "invalid_request", "a parameter twice")
        f = dict(form)
        grant = f.get("grant_type", "")
        client = "?"
        if grant == "client_credentials":
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Basic "):
                raise Reject(401, "invalid_client", "no Basic credential")
            try:
                raw = base64.b64decode(auth[6:], validate=True).decode("ascii")
            except (binascii.Error, UnicodeDecodeError):
                raise Reject(401, "invalid_client", "Basic is not base64")
            if ":" not in raw:
                raise Reject(401, "invalid_client", "Basic without ':'")
            u, _, p = raw.partition(":")
            client = urllib.parse.unquote_plus(u)
            ep.bump("attempts", client)
            cl = ep.clients.get(client)
            if cl is None or cl["grant"] != grant:
                raise Reject(401, "invalid_client", "unknown client", client)
            if urllib.parse.unquote_plus(p) != cl["secret"]:
                raise Reject(401, "invalid_client", "wrong client secret", client)
            extra = set(f) - {"grant_type", "scope"}
        elif grant == "refresh_token":
            client = f.get("client_id", "?")
            ep.bump("attempts", client)
            cl = ep.clients.get(client)
            if cl is None or cl["grant"] != grant:
                raise Reject(400, "invalid_client", "unknown client", client)
            if f.get("refresh_token") != cl["refresh_token"]:
                raise Reject(400, "invalid_grant", "wrong refresh token", client)
            extra = set(f) - {"grant_type", "scope", "refresh_token", "client_id"}
        elif grant == JWT_BEARER:
            a = f.get("assertion", "")
            try:
                unverified = json.loads(b64url_decode(a.split(".")[1]))
                client = str(unverified.get("iss", "?"))
            except (ValueError, IndexError, AttributeError):
                client = "?"
            ep.bump("attempts", client)
            cl = ep.clients.get(client)
            if cl is None or cl["grant"] != "jwt_bearer":
                raise Reject(400, "invalid_client", "unknown issuer", client)
            try:
                head, claims = ep.verify_jws(client, a, cl["alg"])
            except ValueError as e:
                raise Reject(400, "invalid_grant", "assertion: %s" % e, client)
            self._claims(client, claims, sub=client, aud=cl["aud"], span=600,
                         need_jti=True)
            extra = set(f) - {"grant_type", "scope", "assertion"}
            self._note(client, alg=head.get("alg"), aud=claims.get("aud"),
                       life=claims["exp"] - claims["iat"])
        else:
            ep.bump("attempts", "?")
            raise Reject(400, "unsupported_grant_type", "grant_type %r" % grant[:40])
        if extra:
            raise Reject(400, "invalid_request", "unexpected %s" % sorted(extra), client)
        if ctype != "application/x-www-form-urlencoded":
            raise Reject(400, "invalid_request", "Content-Type %r" % ctype, client)
        if f.get("scope") != cl.get("scope"):
            raise Reject(400, "invalid_scope", "scope %r, want %r" %
                         (f.get("scope"), cl.get("scope")), client)
        self._note(client, scope=f.get("scope"))
        if cl.get("delay_ms"):
            time.sleep(cl["delay_ms"] / 1000.0)
        tok = ep.issue(client)
        return 200, {"access_token": tok, "token_type": "Bearer",
                     "expires_in": cl.get("expires_in", 3600)}, client

    def _claims(self, client, c, sub, aud, span, need_jti):
        now = time.time()
        for k in ("iat", "exp"):
            if not isinstance(c.get(k), int) or isinstance(c.get(k), bool):
                raise Reject(400, "invalid_grant", "%s is not an integer" % k, client)
        if sub is not None and c.get("sub") != sub:
            raise Reject(400, "invalid_grant", "sub %r, want %r" % (c.get("sub"), sub), client)
        if aud is not None:
            a = c.get("aud")
            if a != aud and not (isinstance(a, list) and aud in a):
                raise Reject(400, "invalid_grant", "aud %r, want %r" % (a, aud), client)
        if c["exp"] <= now:
            raise Reject(400, "invalid_grant", "expired", client)
        if not 0 < c["exp"] - c["iat"] <= span:
            raise Reject(400, "invalid_grant", "lives %d s" % (c["exp"] - c["iat"]), client)
        if need_jti:
            if abs(c["iat"] - now) > 60:
                raise Reject(400, "invalid_grant", "iat %d s from now" % (c["iat"] - now), client)
            j = c.get("jti")
            if not isinstance(j, str) or not j:
                raise Reject(400, "invalid_grant", "no jti", client)
            with self.server.ep.lock:
                if j in self.server.ep.jtis:
                    raise Reject(400, "invalid_grant", "jti replayed", client)
                self.server.ep.jtis.add(j)
        elif not now - 120 <= c["iat"] <= now + 1:
            raise Reject(401, "github", "iat %d s from now" % (c["iat"] - now), client)

    # ---- GitHub App

    def _github(self, path, body):
        ep = self.server.ep
        auth = self.headers.get("Authorization", "")
        jwt = auth[7:] if auth.startswith("Bearer ") else ""
        try:
            app = str(json.loads(b64url_decode(jwt.split(".")[1])).get("iss", "?"))
        except (ValueError, IndexError, AttributeError):
            app = "?"
        ep.bump("attempts", app)
        cl = ep.clients.get(app)
        if cl is None or cl["grant"] != "github_app":
            raise Reject(401, "github", "A JSON web token could not be decoded", app)
        inst = path[len("/app/installations/"):-len("/access_tokens")]
        if inst != str(cl["installation"]):
            raise Reject(404, "github", "no installation %r" % inst, app)
        if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            raise Reject(400, "github", "X-GitHub-Api-Version %r" %
                         self.headers.get("X-GitHub-Api-Version"), app)
        if body:
            raise Reject(400, "github", "a body of %d bytes" % len(body), app)
        try:
            head, claims = ep.verify_jws(app, jwt, "RS256")
        except ValueError as e:
            raise Reject(401, "github", "JWT: %s" % e, app)
        if str(claims.get("iss")) != app:
            raise Reject(401, "github", "iss", app)
        try:
            self._claims(app, claims, sub=None, aud=None, span=600, need_jti=False)
        except Reject as r:
            raise Reject(401, "github", r.why, app)
        self._note(app, alg=head.get("alg"), life=claims["exp"] - claims["iat"],
                   api_version=self.headers.get("X-GitHub-Api-Version"))
        if cl.get("delay_ms"):
            time.sleep(cl["delay_ms"] / 1000.0)
        tok = ep.issue(app)
        exp = datetime.datetime.fromtimestamp(int(time.time()) + cl.get("expires_in", 3600),
                                              datetime.timezone.utc)
        return 201, {"token": tok, "expires_at": exp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "permissions": {"contents": "read"},
                     "repository_selection": "all"}, app


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, fam, addr, ep, sslctx, label):
        self.address_family = fam
        self.ep, self.sslctx, self.label = ep, sslctx, label
        super().__init__(addr, Handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()

    def handle_error(self, request, client_address):
        pass


def log(msg):
    print("tokenep: %s" % msg, file=sys.stderr, flush=True)


def parse_listen(spec):
    addr, cert, key = spec.split(";")
    if addr.startswith("["):
        host, _, port = addr[1:].partition("]:")
        return socket.AF_INET6, host, int(port), cert, key
    host, _, port = addr.rpartition(":")
    return socket.AF_INET, host, int(port), cert, key


def cmd_serve(a):
    crypto = import_crypto()
    with open(a.config) as f:
        config = json.load(f)
    ep = Endpoint(config, a.issued, crypto)
    open(a.issued, "a").close()
    for spec in a.listen:
        fam, host, port, cert, key = parse_listen(spec)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        srv = Server(fam, (host, port), ep, ctx, "%s:%d" % (host, port))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("%d\n" % os.getpid())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *x: stop.set())
    signal.signal(signal.SIGINT, lambda *x: stop.set())
    while not stop.wait(1):
        pass
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--config", required=True)
    s.add_argument("--issued", required=True)
    s.add_argument("--ready")
    s.add_argument("listen", nargs="+")
    sub.add_parser("deps")
    a = p.parse_args()
    if a.cmd == "deps":
        try:
            import_crypto()
        except ImportError as e:
            print("tokenep.py: %s (apt-get install python3-cryptography)" % e,
                  file=sys.stderr)
            return 1
        return 0
    return cmd_serve(a)


if __name__ == "__main__":
    sys.exit(main())
