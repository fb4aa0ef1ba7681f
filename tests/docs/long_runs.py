#!/usr/bin/env python3
"""Rewrites the long-run regions of the READMEs from a fresh run (called by tests/docs/long_runs.sh).

    long_runs.py names [README...]                       the NAMEs of every region, one per line
    long_runs.py rewrite NAME OUTPUT_FILE COMMAND [README...]

A region is
    <!-- long-run: NAME [lines=/REGEX/] -->
    prose, then a ```text block (its first line may be `$ command`, shown and kept as is)
    Measured on <CPU model>, <n> cores, <date> UTC: `<command>`.
    <!-- /long-run -->
The new block keeps the excerpt's choice of lines: with lines=/REGEX/, every output line that
REGEX matches (re.search); without it, for each line of the old block, in order, the next output
line of the same shape (the same text once every number is replaced by #); a `...` line stays.
The `Measured on` line is written last, after the block.
"""
import datetime
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from page import cpu_name  # noqa: E402  (bench/page.py)

OPEN = re.compile(r"^<!--\s*long-run:\s*(\w+)(?:\s+lines=/(.*)/)?\s*-->\s*$")
CLOSE = re.compile(r"^<!--\s*/long-run\s*-->\s*$")
NUM = re.compile(r"[+-]?\d[\d,]*(?:\.\d*)?(?:[eE][+-]?\d+)?")


def readmes(given):
    if given:
        return [pathlib.Path(g) for g in given]
    return [ROOT / "README.md", *sorted((ROOT / "examples").glob("**/README.md"))]


def shape(line):
    return " ".join(NUM.sub("#", line).split())


def excerpt(old, output, regex, where):
    """The new lines of the block from the old ones and the run's output lines."""
    shown = old[:1] if old and old[0].startswith("$ ") else []
    if regex is not None:
        return shown + [l for l in output if re.search(regex, l)]
    new, pos = list(shown), 0
    for line in old[len(shown):]:
        if line.strip() == "...":
            new.append(line)
            continue
        k = next((k for k in range(pos, len(output)) if shape(output[k]) == shape(line)), None)
        if k is None:
            sys.exit(f"{where}: the excerpt's line {line!r} has no line of its shape in the output "
                     f"(after output line {pos}); choose the lines anew (or give lines=/REGEX/)")
        new.append(output[k])
        pos = k + 1
    return new


def rewrite(path, name, output, command):
    """Rewrites every region NAME of one README; returns how many."""
    text = path.read_text().splitlines()
    out, i, count = [], 0, 0
    stamp = (f"Measured on {cpu_name()}, {os.cpu_count()} cores, "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC: `{command}`.")
    while i < len(text):
        m = OPEN.match(text[i])
        out.append(text[i])
        i += 1
        if not m or m.group(1) != name:
            continue
        end = next((j for j in range(i, len(text)) if CLOSE.match(text[j])), None)
        if end is None:
            sys.exit(f"{path}:{i}: <!-- long-run: {name} --> has no <!-- /long-run -->")
        region = [l for l in text[i:end] if not l.startswith("Measured on ")]
        opening = next((j for j, l in enumerate(region) if l.startswith("```")), None)
        if opening is None:  # no block yet: the whole output (or the filter's lines)
            body = excerpt([], output, m.group(2) or "", f"{path}:{i}")
            region += ["```text", *body, "```"]
        else:
            closing = next(j for j in range(opening + 1, len(region)) if region[j].startswith("```"))
            body = excerpt(region[opening + 1:closing], output, m.group(2), f"{path}:{i + opening + 1}")
            region[opening + 1:closing] = body
        while region and not region[-1].strip():
            region.pop()
        out += region + [stamp]
        i, count = end, count + 1
    if count:
        path.write_text("\n".join(out) + "\n")
    return count


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "names":
        names = {m.group(1) for r in readmes(sys.argv[2:]) for l in r.read_text().splitlines()
                 if (m := OPEN.match(l))}
        print("\n".join(sorted(names)))
        sys.exit(0)
    if len(sys.argv) >= 5 and sys.argv[1] == "rewrite":
        name, output, command = sys.argv[2], pathlib.Path(sys.argv[3]).read_text().splitlines(), sys.argv[4]
        n = sum(rewrite(r, name, output, command) for r in readmes(sys.argv[5:]))
        print(f"long_runs: {n} region(s) {name} rewritten")
        sys.exit(0 if n else 1)
    sys.exit(__doc__)
