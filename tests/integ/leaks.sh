#!/bin/sh
# leaks.sh: no secret value, in any form, in anything sluiced wrote or any
# client received, across the whole integration suite.
#
# make check runs it after the namespace suites (ctl.sh, icpt.sh,
# secrets.sh, tokens.sh, hostile.sh, observe.sh), which keep, in $SLUICE_ARTIFACTS/NAME, sluiced's log and
# --check output, the audit trail, every answer of the control API and of
# /metrics, every byte the sandbox's clients received, and the secret values
# their daemons held (canary-values: icpt.sh's canaries, which an inject
# rule sends upstream; secrets.sh's rotated and reflected values).  Every
# file is searched for every value: as is, base64 (standard and URL-safe,
# at any of the three alignments), percent-encoded (either hex case, and
# with '+' for space).
#
# env: top_builddir (set by make check), SLUICE_ARTIFACTS (default
# $top_builddir/tests/integ/artifacts).  Exit 0 no leak, 1 a leak or
# nothing to scan (a suite that should have kept its files did not).

set -u
top_builddir=${top_builddir:-$(pwd)}
dir=${SLUICE_ARTIFACTS:-$top_builddir/tests/integ/artifacts}
PY=${PYTHON:-python3}

exec "$PY" - "$dir" <<'PYEOF'
import base64, os, sys, urllib.parse

top = sys.argv[1]
need = {"icpt": ["sluiced.log", "audit.jsonl", "sandbox-received",
                 "api-answers", "canary-values"],
        "secrets": ["sluiced.log", "audit.jsonl", "sandbox-received",
                    "api-answers", "canary-values", "check.log"],
        "tokens": ["sluiced.log", "audit.jsonl", "sandbox-received",
                   "api-answers", "canary-values", "check.log"],
        "ctl": ["sluiced.log", "audit.jsonl", "api-answers"],
        "hostile": ["sluiced.log", "audit.jsonl", "sandbox-received",
                    "canary-values"],
        "observe": ["sluiced.log", "audit.jsonl", "sandbox-received",
                    "api-answers", "canary-values"]}
npass = nfail = 0

def report(ok, name, why=""):
    global npass, nfail
    if ok:
        npass += 1
        print("ok " + name)
    else:
        nfail += 1
        print("FAIL %s: %s" % (name, why))

def forms(v):
    """The value and what it looks like encoded: base64 at each of the
    three alignments (only the characters the value alone decides),
    URL-safe too, and percent-encodings."""
    out = {v}
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + v).rstrip(b"=")
        lead = (0, 2, 3)[shift]
        end = (len(v) + shift) * 8 // 6  # chars fully inside the bytes
        core = enc[lead:end]
        if len(core) >= 8:
            out.add(core)
            out.add(core.replace(b"+", b"-").replace(b"/", b"_"))
    s = v.decode("latin-1")
    for q in (urllib.parse.quote(s, safe=""), urllib.parse.quote_plus(s)):
        out.add(q.encode())
        out.add(q.lower().encode())
    return out

values = []
for suite, files in sorted(need.items()):
    d = os.path.join(top, suite)
    missing = [f for f in files if not os.path.isfile(os.path.join(d, f))]
    report(not missing, "kept_" + suite,
           "%s did not keep %s in %s" % (suite, ", ".join(missing), d))
    cv = os.path.join(d, "canary-values")
    if os.path.isfile(cv):
        values += [l.encode() for l in open(cv).read().splitlines() if l]
report(len(values) >= 4, "values", "only %d secret values to look for" % len(values))

patterns = set()
for v in values:
    patterns |= forms(v)
scanned = 0
for suite in sorted(os.listdir(top)) if os.path.isdir(top) else []:
    d = os.path.join(top, suite)
    hits = []
    for f in sorted(os.listdir(d)):
        if f == "canary-values":
            continue
        data = open(os.path.join(d, f), "rb").read()
        scanned += len(data)
        for p in patterns:
            if p in data:
                hits.append("%s holds a secret (%s...)" % (f, p[:6].decode("latin-1")))
                break
    report(not hits, "no_leak_" + suite, "; ".join(hits))

# the scan finds what it looks for
probe = b"x" + base64.b64encode(b"{\"k\":\"" + values[0] + b"\"}") + b"y" if values else b""
report(bool(values) and any(p in probe for p in forms(values[0])), "scan_finds",
       "the scan misses a value inside a longer base64 text")
print("scanned %d bytes for %d forms of %d values" % (scanned, len(patterns), len(values)))
print("%d passed, %d failed" % (npass, nfail))
sys.exit(1 if nfail else 0)
PYEOF
