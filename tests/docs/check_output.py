#!/usr/bin/env python3
"""Program output in the READMEs, checked against a real run (ctest entries doc_output:README:LINE).

    check_output.py list ROOT [README...]      one README:LINE per `<!-- check: output CMD [tol=R] -->`
    check_output.py run ROOT README:LINE       runs CMD from the current directory (the build
                                               directory) and matches the ```text block below it

Matching (the conventions are in tests/docs/snippets.py). A first doc line `$ command` is shown to the
reader and skipped. The doc lines must match the output in order, each against the next output line,
except a doc line `...`, which skips zero or more output lines; the last doc line must meet the last
output line unless it is `...`. Two lines match when they have the same whitespace tokens, where
  * a numeric token (a sign, digits with thousands commas, a fraction, an exponent, then `%`, `x` or
    `×`; text before it such as `(` or `loss=` and punctuation after it must be equal) equals the
    output's within relative tolerance R; R = 0 (the default) means equal as printed;
  * a volatile token is not compared: a number directly followed by a time or speed unit token (s, ms,
    µs, steps/s, tokens/s, ms/step) or written with one (12.5ms), and any token directly after `ETA`.
"""
import pathlib
import re
import shlex
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from snippets import blocks, readmes, relname  # noqa: E402

NUMBER = re.compile(r"^(?P<pre>[^\d]*?)(?P<num>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?"
                    r"|[+-]?\.\d+(?:[eE][+-]?\d+)?)(?P<unit>%|x|×)?(?P<post>[,;:)\]}>]*)$")
TIME_UNITS = {"s", "ms", "µs", "us", "steps/s", "tokens/s", "ms/step"}
TIME_ATTACHED = re.compile(r"^[+-]?[\d.,]+(?:s|ms|µs|us|steps/s|tokens/s|ms/step)[,;:)\]}]*$")


def volatile(tokens):
    """Indices of the tokens that are not compared."""
    out = set()
    for i, t in enumerate(tokens):
        nxt = tokens[i + 1].rstrip(",;:)]}.") if i + 1 < len(tokens) else ""
        if (NUMBER.match(t) and nxt in TIME_UNITS) or TIME_ATTACHED.match(t) or (i > 0 and tokens[i - 1] == "ETA"):
            out.add(i)
    return out


def token_diff(doc, out, tol):
    """None when the two lines match, else (doc token, output token) of the first difference."""
    a, b = doc.split(), out.split()
    if len(a) != len(b):
        return (f"{len(a)} tokens", f"{len(b)} tokens")
    skip = volatile(a) | volatile(b)
    for i, (x, y) in enumerate(zip(a, b)):
        if i in skip or x == y:
            continue
        mx, my = NUMBER.match(x), NUMBER.match(y)
        if tol > 0 and mx and my and (mx["pre"], mx["unit"], mx["post"]) == (my["pre"], my["unit"], my["post"]):
            u, v = float(mx["num"].replace(",", "")), float(my["num"].replace(",", ""))
            if abs(u - v) <= tol * max(abs(u), abs(v)):
                continue
        return (x, y)
    return None


def match(doc, out, tol):
    """None when the doc lines match the output lines, else the furthest failure:
    (doc index, output index or None at the end of the output, (doc token, output token))."""
    best = [(-1, -1), None]

    def fail(i, j, why, key=None):  # keeps the failure furthest into the doc, then into the output
        key = key or (i, len(out) if j is None else j)
        if key > best[0]:
            best[:] = [key, (i, j, why)]
        return False

    memo = {}

    def go(i, j):  # doc[i:] against out[j:]
        if (i, j) in memo:
            return memo[i, j]
        if i == len(doc):
            r = j == len(out) or fail(i - 1, j, ("(end of the doc block)", "more output"), key=(i, j))
        elif doc[i].strip() == "...":
            r = any(go(i + 1, k) for k in range(j, len(out) + 1))
        elif j == len(out):
            r = fail(i, None, (doc[i].split()[0] if doc[i].split() else "(blank)", "(end of output)"))
        else:
            d = token_diff(doc[i], out[j], tol)
            r = go(i + 1, j + 1) if d is None else fail(i, j, d)
        memo[i, j] = r
        return r

    sys.setrecursionlimit(max(10000, 4 * (len(doc) + len(out))))
    return None if go(0, 0) else best[1]


def output_blocks(root, given=()):
    """(README path, fence line, CMD, tol, doc lines, line number of the first doc line)."""
    for readme in readmes(root, given):
        for b in blocks(readme):
            if b["mark"] and b["mark"][0] == "output":
                arg = b["mark"][1]
                m = re.search(r"\s+tol=(\S+)\s*$", arg)
                tol = float(m.group(1)) if m else 0.0
                cmd = arg[:m.start()] if m else arg
                shown = 1 if b["lines"] and b["lines"][0].startswith("$ ") else 0
                yield readme, b["line"], cmd, tol, b["lines"][shown:], b["line"] + 1 + shown


def run(root, entry):
    name, line = entry.rsplit(":", 1)
    path = (root / name).resolve()
    found = [o for o in output_blocks(root, [path]) if o[1] == int(line)]
    if not found:
        sys.exit(f"{entry}: no <!-- check: output ... --> block opens at that line")
    _, _, cmd, tol, doc, first = found[0]
    try:
        p = subprocess.run(shlex.split(cmd), capture_output=True, text=True)
    except OSError as e:
        sys.exit(f"{entry}: cannot run `{cmd}` from {pathlib.Path.cwd()}: {e}")
    out = p.stdout.rstrip().splitlines()
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
        sys.exit(f"{entry}: `{cmd}` exited with {p.returncode}")
    bad = match(doc, out, tol)
    if bad is None:
        print(f"{entry}: {len(doc)} doc lines match the {len(out)} output lines of `{cmd}`")
        return 0
    i, j, (x, y) = bad
    print(f"{entry}: the output of `{cmd}` (tol={tol:g}) does not match the doc")
    print(f"  doc line {first + i}: {doc[i] if i >= 0 else ''}")
    print(f"  output line {j + 1}: {out[j]}" if j is not None and j < len(out) else "  output: (ended)")
    print(f"  token: doc {x!r}, output {y!r}")
    return 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "list":
        root = pathlib.Path(sys.argv[2]).resolve()
        for readme, line, *_ in output_blocks(root, sys.argv[3:]):
            print(f"{relname(root, readme)}:{line}")
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        sys.exit(run(pathlib.Path(sys.argv[2]).resolve(), sys.argv[3]))
    sys.exit(__doc__)
