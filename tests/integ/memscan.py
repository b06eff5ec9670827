#!/usr/bin/env python3
"""memscan.py: what a process's memory holds, read through /proc/PID/mem
(root), for the privilege separation tests.

  memscan.py has PID HEX...       prints each HEX (bytes) found, one a line
  memscan.py gwkey KEYFILE         prints the raw X25519 private key of a
                                   PEM PKCS#8 gateway.key, in hex
  memscan.py scalar KEYFILE        prints the private scalar of a PEM EC key
                                   (signing.key), in hex, big-endian
  memscan.py cakey PID CERT        prints, in hex, the private scalar of the
                                   CA certificate CERT (PEM) found in PID's
                                   memory as a SEC1 DER ECPrivateKey, if any

Every mapping is read, guarded (no-access) pages too; mappings over 1 GiB
(sanitizer shadow and reserved spaces) and mappings of nothing resident
are skipped.  Exit status 0, or 2 on a usage error.
"""
import base64
import re
import sys

MAX_REGION = 1 << 30
CHUNK = 1 << 20


def regions(pid):
    rss = {}
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:
                cur = (int(m.group(1), 16), int(m.group(2), 16))
                rss[cur] = 0
            elif line.startswith("Rss:") and cur is not None:
                rss[cur] = int(line.split()[1])
    for (lo, hi), kb in rss.items():
        if kb > 0 and hi - lo <= MAX_REGION:
            yield lo, hi


def memory(pid):
    """Yields (address, bytes) chunks of every readable resident region."""
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for lo, hi in regions(pid):
            buf = bytearray()
            addr = lo
            while addr < hi:
                n = min(CHUNK, hi - addr)
                try:
                    mem.seek(addr)
                    b = mem.read(n)
                except OSError:
                    b = b""
                buf += b if b else b"\0" * n
                addr += n
            yield lo, bytes(buf)


def has(pid, needles):
    found = set()
    for _, buf in memory(pid):
        for nd in needles:
            if nd not in found and buf.find(nd) != -1:
                found.add(nd)
    return found


def gwkey(path):
    pem = open(path).read()
    body = "".join(l for l in pem.splitlines() if l and not l.startswith("-----"))
    der = base64.b64decode(body)
    return der[-32:]


def scalar(path):
    from cryptography.hazmat.primitives import serialization

    k = serialization.load_pem_private_key(open(path, "rb").read(), None)
    return k.private_numbers().private_value.to_bytes(32, "big")


def cakey(pid, certpath):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(open(certpath, "rb").read())
    want = cert.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    prefix = bytes.fromhex("307702010104" + "20")
    for _, buf in memory(pid):
        i = buf.find(prefix)
        while i != -1:
            d = buf[i + len(prefix):i + len(prefix) + 32]
            if len(d) == 32:
                try:
                    k = ec.derive_private_key(int.from_bytes(d, "big"), ec.SECP256R1())
                    got = k.public_key().public_bytes(
                        serialization.Encoding.X962,
                        serialization.PublicFormat.UncompressedPoint)
                    if got == want:
                        return d
                except ValueError:
                    pass
            i = buf.find(prefix, i + 1)
    return None


def main(argv):
    if len(argv) >= 3 and argv[0] == "has":
        needles = [bytes.fromhex(h) for h in argv[2:]]
        for nd in sorted(has(int(argv[1]), needles)):
            print(nd.hex())
        return 0
    if len(argv) == 2 and argv[0] == "gwkey":
        print(gwkey(argv[1]).hex())
        return 0
    if len(argv) == 2 and argv[0] == "scalar":
        print(scalar(argv[1]).hex())
        return 0
    if len(argv) == 3 and argv[0] == "cakey":
        d = cakey(int(argv[1]), argv[2])
        if d is not None:
            print(d.hex())
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
