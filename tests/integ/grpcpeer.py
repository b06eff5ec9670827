#!/usr/bin/env python3
"""grpcpeer.py: a gRPC server and client for tests/integ/h2.sh (python3-grpcio),
with no generated code: messages are bytes.

  grpcpeer.py serve ADDR:PORT --cert C --key K --ready FILE --log FILE
      services test.Echo (Unary, ServerStream, ClientStream, Bidi, Leak)
      and test.Admin (Delete); every call is logged to FILE as a JSON line
      {"method", "metadata"}; Unary answers JSON {"got", "auth_sha256"}
      (the SHA-256 of its x-api-key metadata, never the value); Leak
      answers JSON {"key", "len"} with the x-api-key value itself, and
      sends it in the trailing metadata x-leak too; every call ends with
      the trailing metadata x-trailer: yes
  grpcpeer.py call HOST:PORT --name SNI --ca CA --method /svc/M
                   [--msg S]... [--n N] [--timeout S]
      prints JSON {"code", "details", "responses", "trailing"}; with
      --parallel /svc/M2 a second call goes on the same channel at once
      and its result is printed too, as "other"
"""
import argparse
import hashlib
import json
import sys
import threading
import time
from concurrent import futures

import grpc


def log_call(path, method, ctx):
    md = dict((k, v) for k, v in ctx.invocation_metadata())
    with open(path, "a") as f:
        f.write(json.dumps({"method": method, "metadata": sorted(md)}) + "\n")
    return md


def serve(a):
    trail = (("x-trailer", "yes"),)

    def unary(req, ctx):
        md = log_call(a.log, "/test.Echo/Unary", ctx)
        key = md.get("x-api-key", "")
        ctx.set_trailing_metadata(trail)
        return json.dumps({"got": req.decode(), "auth_sha256":
                           hashlib.sha256(key.encode()).hexdigest() if key else None}).encode()

    def server_stream(req, ctx):
        log_call(a.log, "/test.Echo/ServerStream", ctx)
        ctx.set_trailing_metadata(trail)
        for i in range(int(req.decode() or "3")):
            yield b"m%d" % i

    def client_stream(reqs, ctx):
        log_call(a.log, "/test.Echo/ClientStream", ctx)
        ctx.set_trailing_metadata(trail)
        return b"|".join(reqs)

    def bidi(reqs, ctx):
        log_call(a.log, "/test.Echo/Bidi", ctx)
        ctx.set_trailing_metadata(trail)
        for r in reqs:
            yield r.upper()

    def leak(req, ctx):
        # a careless server: the credential back, in the message and in
        # the trailing metadata
        md = log_call(a.log, "/test.Echo/Leak", ctx)
        key = md.get("x-api-key", "")
        ctx.set_trailing_metadata(trail + (("x-leak", key),))
        return json.dumps({"key": key, "len": len(key)}).encode()

    def delete(req, ctx):
        log_call(a.log, "/test.Admin/Delete", ctx)
        return b"deleted"

    h = grpc.method_handlers_generic_handler("test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Leak": grpc.unary_unary_rpc_method_handler(leak),
    })
    adm = grpc.method_handlers_generic_handler("test.Admin", {
        "Delete": grpc.unary_unary_rpc_method_handler(delete),
    })
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    srv.add_generic_rpc_handlers((h, adm))
    with open(a.key, "rb") as k, open(a.cert, "rb") as c:
        creds = grpc.ssl_server_credentials(((k.read(), c.read()),))
    srv.add_secure_port(a.addr, creds)
    srv.start()
    with open(a.ready, "w") as f:
        f.write("ready\n")
    srv.wait_for_termination()


def one_call(ch, method, msgs, n, timeout):
    out = {"method": method, "code": None, "details": None, "responses": [],
           "trailing": {}}
    kind = method.rsplit("/", 1)[1]
    try:
        if kind in ("Unary", "Delete", "Leak"):
            f = ch.unary_unary(method)
            resp, call = f.with_call((msgs or [b"hi"])[0], timeout=timeout)
            out["responses"] = [resp.decode()]
        elif kind == "ServerStream":
            call = ch.unary_stream(method)(str(n).encode(), timeout=timeout)
            out["responses"] = [r.decode() for r in call]
        elif kind == "ClientStream":
            f = ch.stream_unary(method)
            resp, call = f.with_call(iter(msgs), timeout=timeout)
            out["responses"] = [resp.decode()]
        else:
            call = ch.stream_stream(method)(iter(msgs), timeout=timeout)
            out["responses"] = [r.decode() for r in call]
        out["code"] = call.code().value[0]
        out["trailing"] = dict(call.trailing_metadata() or ())
    except grpc.RpcError as e:
        out["code"] = e.code().value[0]
        out["details"] = e.details()
        try:
            out["trailing"] = dict(e.trailing_metadata() or ())
        except Exception:  # not every error has them
            pass
    return out


def call(a):
    with open(a.ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    ch = grpc.secure_channel(a.addr, creds)
    msgs = [m.encode() for m in a.msg]
    res = {}
    t = None
    if a.parallel:
        def other():
            res["other"] = one_call(ch, a.parallel, [b"x"], a.n, a.timeout)
        t = threading.Thread(target=other)
        t.start()
    out = one_call(ch, a.method, msgs, a.n, a.timeout)
    if t is not None:
        t.join()
        out["other"] = res.get("other")
    print(json.dumps(out))
    ch.close()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("addr")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--ready", required=True)
    s.add_argument("--log", required=True)
    c = sub.add_parser("call")
    c.add_argument("addr")
    c.add_argument("--name", required=True)
    c.add_argument("--ca", required=True)
    c.add_argument("--method", required=True)
    c.add_argument("--msg", action="append", default=[])
    c.add_argument("--n", type=int, default=3)
    c.add_argument("--timeout", type=float, default=10)
    c.add_argument("--parallel")
    a = ap.parse_args()
    if a.cmd == "serve":
        serve(a)
    else:
        call(a)


if __name__ == "__main__":
    sys.exit(main())
