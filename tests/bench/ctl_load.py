#!/usr/bin/env python3
"""ctl_load.py: the load generator of tests/bench/ctl.sh (control-plane bench).

Subcommands (all print one JSON object on stdout; errors go to stderr and
exit 1):

  addrs N                      the source addresses of sandboxes sb0..sbN-1
  reg SOCK N CLIENTS POLICY    POST /v1/sandboxes for sb0..sbN-1 over CLIENTS
                               keep-alive connections (one process each)
  del SOCK N CLIENTS           DELETE /v1/sandboxes/sbI for the same
  upstream ADDR PORT READY     echo server that holds connections open
                               (touches READY once it listens)
  conns SOCK N PER ADDR PORT SLUICED_PID ONE
                               PER connections from each of sb0..sbN-1 to
                               ADDR:PORT through sluiced, then the policy
                               swaps (sandbox ONE alone, then all); see
                               tests/bench/ctl.sh

The HTTP client is deliberately minimal (one request at a time on a
keep-alive Unix socket, the answer read by Content-Length) so that the
figures are the daemon's, not the client's.
"""
import json
import os
import select
import socket
import sys
import time

IP_BIND_ADDRESS_NO_PORT = 24
PROBE = b"\x00sluice-bench\n"	# first bytes: not TLS, not HTTP -> opaque


def fail(msg):
    sys.stderr.write("ctl_load: %s\n" % msg)
    sys.exit(1)


def sb_addr(i):
    """Sandbox i's source: 198.18.16.1 .. 198.18.19.250 (250 a /24)."""
    if i >= 1000:
        fail("at most 1000 sandboxes (198.18.16.0/22)")
    return "198.18.%d.%d" % (16 + i // 250, 1 + i % 250)


class Ctl:
    """One keep-alive HTTP/1.1 connection to the control socket."""

    def __init__(self, path):
        self.path = path
        self.s = None
        self.buf = b""
        self.connect()

    def connect(self):
        if self.s is not None:
            self.s.close()
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(self.path)
        self.buf = b""

    def send(self, method, path, body=None):
        if body is None:
            body = b""
        elif isinstance(body, str):
            body = body.encode()
        head = "%s %s HTTP/1.1\r\nHost: sluice\r\nContent-Length: %d\r\n\r\n" % (
            method, path, len(body))
        self.s.sendall(head.encode() + body)

    def recv(self):
        """Reads one answer: (status, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise ConnectionError("control socket closed")
            self.buf += d
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        clen = 0
        for ln in lines[1:]:
            k, _, v = ln.partition(b":")
            if k.strip().lower() == b"content-length":
                clen = int(v)
        while len(rest) < clen:
            d = self.s.recv(max(65536, clen - len(rest)))
            if not d:
                raise ConnectionError("control socket closed in a body")
            rest += d
        self.buf = rest[clen:]
        return status, rest[:clen]

    def req(self, method, path, body=None):
        self.send(method, path, body)
        return self.recv()


def metric(ctl, name):
    st, body = ctl.req("GET", "/metrics")
    if st != 200:
        fail("GET /metrics: %d" % st)
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    fail("GET /metrics: no %s" % name)


def fanout(n, clients, job):
    """Runs job(ctl, i) for i in 0..n-1, split over `clients` processes,
    each with its own keep-alive connection; returns the seconds from the
    moment all are connected until the last has finished."""
    go_r, go_w = os.pipe()
    kids = []
    for k in range(clients):
        rd, wr = os.pipe()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rd)
            os.close(go_w)
            os.close(ready_r)
            code = 0
            res = {"marks": []}
            try:
                ctl = Ctl(SOCK)
                os.write(ready_w, b"r")
                os.read(go_r, 1)
                done = 0
                for i in range(k, n, clients):
                    err = job(ctl, i)
                    if err:
                        res["err"] = err[:500]
                        code = 1
                        break
                    done += 1
                    if done % 100 == 0:
                        res["marks"].append(time.perf_counter())
            except Exception as e:  # noqa: BLE001 - reported to the parent
                res["err"] = ("%s" % e)[:500]
                code = 1
            out = json.dumps(res).encode()
            while out:
                out = out[os.write(wr, out):]
            os._exit(code)
        os.close(wr)
        os.close(ready_w)
        kids.append((pid, rd, ready_r))
    for _, _, ready_r in kids:
        if os.read(ready_r, 1) != b"r":
            fail("a client could not connect to %s" % SOCK)
    t0 = time.perf_counter()
    os.write(go_w, b"g" * clients)
    errs = []
    marks = []
    for pid, rd, _ in kids:
        chunks = []
        while True:
            d = os.read(rd, 65536)
            if not d:
                break
            chunks.append(d)
        _, status = os.waitpid(pid, 0)
        try:
            res = json.loads(b"".join(chunks))
        except ValueError:
            res = {"err": "client exited %d" % status}
        if status != 0 or "err" in res:
            errs.append(res.get("err", "client exited %d" % status))
        marks.append(res.get("marks", []))
    secs = time.perf_counter() - t0
    if errs:
        fail("; ".join(errs[:3]))
    # Each hundred's rate (one client): does the cost grow with the count?
    per100 = []
    if clients == 1:
        prev = t0
        for t in marks[0]:
            per100.append(round(100 / (t - prev)))
            prev = t
    return secs, per100


def do_reg(n, clients, policy):
    def job(ctl, i):
        body = json.dumps({"id": "sb%d" % i, "team": "bench",
                           "sources": [sb_addr(i) + "/32"], "policy": policy})
        st, out = ctl.req("POST", "/v1/sandboxes", body)
        if st != 201:
            return "POST sb%d: %d %s" % (i, st, out[:200].decode(errors="replace"))
        return None
    secs, per100 = fanout(n, clients, job)
    print(json.dumps({"n": n, "clients": clients, "secs": secs, "rate": n / secs,
                      "per100": " ".join(str(x) for x in per100)}))


def do_del(n, clients):
    def job(ctl, i):
        st, out = ctl.req("DELETE", "/v1/sandboxes/sb%d" % i)
        if st != 200:
            return "DELETE sb%d: %d %s" % (i, st, out[:200].decode(errors="replace"))
        return None
    secs, per100 = fanout(n, clients, job)
    print(json.dumps({"n": n, "clients": clients, "secs": secs, "rate": n / secs,
                      "per100": " ".join(str(x) for x in per100)}))


def do_upstream(addr, port, ready):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(4096)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    socks = {}
    open(ready, "w").close()
    while True:
        for fd, ev in ep.poll():
            if fd == ls.fileno():
                while True:
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    socks[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = socks[fd]
            try:
                d = c.recv(65536)
                if d:
                    c.send(d)	# tiny probes: never blocks
                    continue
            except OSError:
                pass
            ep.unregister(fd)
            del socks[fd]
            c.close()


class Conns:
    """The client side of the open connections, all in one epoll set."""

    def __init__(self, dst):
        self.dst = dst
        self.ep = select.epoll()
        self.socks = {}		# fd -> (socket, sandbox index)
        self.state = {}		# fd -> "connecting" | "echo" | "open"
        self.got = {}		# fd -> echoed bytes so far

    def open(self, which, per, window=256, timeout=30.0):
        """Opens `per` connections from each sandbox in `which`; each counts
        once its probe came back (relayed both ways through sluiced)."""
        todo = [i for i in which for _ in range(per)]
        todo.reverse()
        pending = 0
        done = 0
        t0 = time.perf_counter()
        deadline = t0 + timeout
        while todo or pending:
            while todo and pending < window:
                i = todo.pop()
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
                s.bind((sb_addr(i), 0))
                e = s.connect_ex(self.dst)
                if e not in (0, 115):	# EINPROGRESS
                    fail("connect from %s: %s" % (sb_addr(i), os.strerror(e)))
                fd = s.fileno()
                self.socks[fd] = (s, i)
                self.state[fd] = "connecting"
                self.got[fd] = b""
                self.ep.register(fd, select.EPOLLOUT)
                pending += 1
            left = deadline - time.perf_counter()
            if left <= 0:
                fail("%d connections still not relayed after %.0f s (%d done)"
                     % (pending + len(todo), timeout, done))
            for fd, ev in self.ep.poll(min(left, 1.0)):
                s, i = self.socks[fd]
                if self.state[fd] == "connecting":
                    e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if e:
                        fail("connect from %s: %s" % (sb_addr(i), os.strerror(e)))
                    s.send(PROBE)
                    self.state[fd] = "echo"
                    self.ep.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                    continue
                try:
                    d = s.recv(256)
                except OSError as e:
                    d = b""
                    why = str(e)
                else:
                    why = "closed"
                if not d:
                    fail("connection from %s (sb%d) %s before its echo (is it "
                         "relayed?)" % (sb_addr(i), i, why))
                self.got[fd] += d
                if self.got[fd] == PROBE:
                    self.state[fd] = "open"
                    pending -= 1
                    done += 1
        return done, time.perf_counter() - t0

    def fds_of(self, which):
        w = set(which)
        return [fd for fd, (_, i) in self.socks.items() if i in w]

    def quiet(self, secs):
        """Sockets that close within secs (none should)."""
        closed = []
        end = time.perf_counter() + secs
        while True:
            left = end - time.perf_counter()
            if left <= 0:
                return closed
            for fd, ev in self.ep.poll(left, 4096):
                s, i = self.socks[fd]
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                if not d:
                    self.ep.unregister(fd)
                    s.close()
                    del self.socks[fd]
                    closed.append(i)


def timed_put(ctl, path, body, conns, fds):
    """Sends the PUT, then watches fds until all closed.  Returns (status,
    ms until the answer, ms until the last of fds closed, others closed)."""
    t0 = time.perf_counter()
    ctl.send("PUT", path, body)
    # The answer is read on this thread between epoll rounds: register the
    # control socket in the same set so neither waits on the other.
    cfd = ctl.s.fileno()
    conns.ep.register(cfd, select.EPOLLIN)
    conns.socks[cfd] = (ctl.s, -1)
    answered = None
    status = None
    want = set(fds)
    others = []
    last = t0
    deadline = t0 + 20.0
    while want or answered is None:
        left = deadline - time.perf_counter()
        if left <= 0:
            fail("after %s: %d of %d connections still open, answer %s"
                 % (path, len(want), len(fds),
                    "received" if answered is not None else "not received"))
        for fd, ev in conns.ep.poll(min(left, 1.0), 4096):
            if fd == cfd:
                d = ctl.s.recv(65536)
                if not d:
                    fail("control socket closed during the PUT")
                ctl.buf += d
                if b"\r\n\r\n" in ctl.buf:
                    head, _, rest = ctl.buf.partition(b"\r\n\r\n")
                    clen = 0
                    for ln in head.split(b"\r\n")[1:]:
                        k, _, v = ln.partition(b":")
                        if k.strip().lower() == b"content-length":
                            clen = int(v)
                    if len(rest) >= clen:
                        answered = time.perf_counter()
                        status = int(head.split()[1])
                        ctl.buf = rest[clen:]
                        conns.ep.unregister(cfd)
                        del conns.socks[cfd]
                continue
            s, i = conns.socks[fd]
            try:
                d = s.recv(4096)
            except OSError:
                d = b""
            if d:
                continue
            now = time.perf_counter()
            conns.ep.unregister(fd)
            s.close()
            del conns.socks[fd]
            conns.state.pop(fd, None)
            if fd in want:
                want.discard(fd)
                last = now
            else:
                others.append(i)
    return status, (answered - t0) * 1e3, (last - t0) * 1e3, others


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_metric(ctl, name, want, secs=5.0):
    end = time.perf_counter() + secs
    while True:
        v = metric(ctl, name)
        if v == want or time.perf_counter() > end:
            return v
        time.sleep(0.05)


def do_conns(n, per, addr, port, pid, one):
    ctl = Ctl(SOCK)
    conns = Conns((addr, port))
    res = {"sandboxes": n, "per": per}
    fds0 = fd_count(pid)
    total, secs = conns.open(range(n), per)
    res["opened"] = total
    res["open_rate"] = total / secs
    v = wait_metric(ctl, "sluice_connections_open", total)
    res["metric_open"] = v
    if v != total:
        fail("sluice_connections_open is %g with %d connections relayed" % (v, total))
    res["fds_per_conn"] = (fd_count(pid) - fds0) / total

    # One sandbox to deny-all: its connections close, no other does.
    mine = conns.fds_of([one])
    st, ans, closed, others = timed_put(
        ctl, "/v1/sandboxes/sb%d/policy" % one, '{"policy": "closed"}', conns, mine)
    if st != 200:
        fail("PUT /v1/sandboxes/sb%d/policy: %d" % (one, st))
    others += conns.quiet(0.3)
    if others:
        fail("%d connections of other sandboxes closed (e.g. sb%d)" % (len(others), others[0]))
    v = wait_metric(ctl, "sluice_connections_open", total - len(mine))
    if v != total - len(mine):
        fail("sluice_connections_open is %g, want %d" % (v, total - len(mine)))
    res.update(one_put_ms=ans, one_closed_ms=closed, one_n=len(mine),
               one_others_open=total - len(mine))

    # Back to "open" and its connections again, so that all are open.
    st, out = ctl.req("PUT", "/v1/sandboxes/sb%d/policy" % one, '{"policy": "open"}')
    if st != 200:
        fail("PUT /v1/sandboxes/sb%d/policy back: %d %s" % (one, st, out[:200]))
    conns.open([one], per)
    v = wait_metric(ctl, "sluice_connections_open", total)
    if v != total or len(conns.socks) != total:
        fail("after reopening: %g open in sluiced, %d here, want %d" % (v, len(conns.socks), total))

    # The named policy every sandbox follows to deny-all: all close.
    st, ans, closed, others = timed_put(
        ctl, "/v1/policies/open", "name: open\negress:\n  default: deny\n",
        conns, list(conns.socks))
    if st != 200:
        fail("PUT /v1/policies/open: %d" % st)
    res.update(all_put_ms=ans, all_closed_ms=closed, all_n=total)
    v = wait_metric(ctl, "sluice_connections_open", 0)
    res["metric_open_after"] = v
    if v != 0:
        fail("sluice_connections_open is %g after all closed" % v)
    print(json.dumps(res))


def main():
    global SOCK
    a = sys.argv[1:]
    if not a:
        fail("usage: see the docstring")
    cmd = a[0]
    if cmd == "addrs":
        for i in range(int(a[1])):
            print(sb_addr(i))
    elif cmd == "reg":
        SOCK = a[1]
        do_reg(int(a[2]), int(a[3]), a[4])
    elif cmd == "del":
        SOCK = a[1]
        do_del(int(a[2]), int(a[3]))
    elif cmd == "upstream":
        do_upstream(a[1], int(a[2]), a[3])
    elif cmd == "conns":
        SOCK = a[1]
        do_conns(int(a[2]), int(a[3]), a[4], int(a[5]), int(a[6]), int(a[7]))
    else:
        fail("unknown subcommand %s" % cmd)


SOCK = None
if __name__ == "__main__":
    main()
