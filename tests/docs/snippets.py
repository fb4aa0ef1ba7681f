#!/usr/bin/env python3
"""The code in the READMEs, checked: what a learner reads is what the build compiles.

Conventions (README.md, distributed/README.md, text/README.md and every examples/**/README.md). Every fenced ```cpp block is checked; the
line directly above its opening fence says how:
  <!-- check: file PATH -->     the block is exactly the file PATH (repo-relative); also allowed above
                                ```cmake and ```sh blocks
  <!-- check: excerpt PATH -->  the block's lines, stripped of surrounding whitespace, appear in PATH in
                                the same order; blank lines are ignored, and a line that is just `...` or
                                `// ...` skips code (without one, consecutive lines must be consecutive)
  <!-- check: compile -->       compiled as one translation unit at namespace scope after a prelude
                                (core/ops.hpp, core/gradcheck.hpp, nn/nn.hpp, optim/optim.hpp, <cmath>,
                                <cstdint>, <iostream>, <vector>, `using namespace xgrad;`), float library
  <!-- check: compile body -->  the same, wrapped in a function body (statements)
  <!-- check: compile f64 -->, <!-- check: compile f64 body -->   as above against xgrad_f64
A ```cpp block without such a line is an error. So is a compile block that defines main: a program
must compile alone as printed, with its own includes and no hidden prelude, so it is a real file of
the build shown whole with `check: file` (distributed/README.md shows examples/ddp_basics.cpp).
A ```text block of program output may be preceded by
  <!-- check: output CMD [tol=R] -->   CMD runs from the build directory; see check_output.py
A figure from a long run sits between <!-- long-run: NAME [lines=/REGEX/] --> and <!-- /long-run -->
and is rewritten only by tests/docs/long_runs.sh (never by hand). bench/README.md is written whole
by bench/compare.py --markdown.

    snippets.py check ROOT [README...]            the file and excerpt checks, and unmarked blocks (ctest)
    snippets.py extract ROOT OUTDIR [README...]   writes OUTDIR/{float,f64}/*.cpp for the compile
                                                  checks and prints their paths, one per line
ROOT is the source tree (PATHs are relative to it); READMEs given replace the project's.
"""
import pathlib
import re
import sys

MARK = re.compile(r"^<!--\s*check:\s*(file|excerpt|compile|output)\b(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)")
MAIN = re.compile(r"^\s*(int|auto)\s+main\s*\(", re.M)  # a block that defines main is a program
PROGRAM = "a program (it defines main) is checked as a file, `<!-- check: file PATH -->`, never after the prelude"
PRELUDE = """#include <xgrad/core/ops.hpp>
#include <xgrad/core/gradcheck.hpp>
#include <xgrad/nn/nn.hpp>
#include <xgrad/optim/optim.hpp>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>
using namespace xgrad;
"""


def readmes(root, given=()):
    """The READMEs to check: those given (the fixtures of the tools' own tests), else the project's."""
    if given:
        return [pathlib.Path(g).resolve() for g in given]
    return [root / "README.md", root / "distributed" / "README.md", root / "text" / "README.md", *sorted((root / "examples").glob("**/README.md"))]


def relname(root, path):
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


def blocks(path):
    """Every fenced block of a Markdown file: dicts with lang, line (of the opening fence, 1-based),
    lines (the body, unindented as far as the fence was), mark (kind, argument) from the line above
    or None."""
    text = path.read_text().splitlines()
    out, i = [], 0
    while i < len(text):
        m = FENCE.match(text[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        j = i + 1
        while j < len(text) and not text[j].strip().startswith(ticks):
            j += 1
        above = MARK.match(text[i - 1].strip()) if i > 0 else None
        body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in text[i + 1:j]]
        lang = "cpp" if lang.lower() in ("c++", "cxx", "cc", "cpp") else lang.lower()  # no escaping as ```c++
        out.append({"lang": lang, "line": i + 1, "lines": body,
                    "mark": (above.group(1), above.group(2).strip()) if above else None})
        i = j + 1
    return out


def check_file(root, arg, body):
    """None when the block is exactly the file, else the first difference."""
    path = root / arg
    if not path.is_file():
        return f"no file {arg}"
    want = path.read_text().rstrip("\n").splitlines()
    for n, (a, b) in enumerate(zip(body, want), 1):
        if a.rstrip() != b.rstrip():
            return f"line {n} of the block differs from {arg}:{n}\n    doc : {a}\n    file: {b}"
    if len(body) != len(want):
        return f"the block has {len(body)} lines, {arg} has {len(want)}"
    return None


def check_excerpt(root, arg, body):
    """None when the block's runs (separated by `...`) appear in order, each run on consecutive
    non-blank lines of the file; else the first line that was not found."""
    path = root / arg
    if not path.is_file():
        return f"no file {arg}"
    src = [(n, l.strip()) for n, l in enumerate(path.read_text().splitlines(), 1) if l.strip()]
    runs, run = [], []
    for l in body:
        s = l.strip()
        if s in ("...", "// ..."):
            runs.append(run)
            run = []
        elif s:
            run.append(s)
    runs.append(run)
    pos = 0
    for run in (r for r in runs if r):
        k = next((k for k in range(pos, len(src) - len(run) + 1)
                  if [s for _, s in src[k:k + len(run)]] == run), None)
        if k is None:
            # the longest prefix of the run found after pos names the line that broke it
            texts = [s for _, s in src]
            got = max(common_prefix(run, texts[k:]) for k in range(pos, len(src) + 1))
            return f"line not found in {arg} in this order: {run[got]}"
        pos = k + len(run)
    return None


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def check(root, given=()):
    errors = 0
    for readme in readmes(root, given):
        rel = relname(root, readme)
        for b in blocks(readme):
            where, mark = f"{rel}:{b['line']}", b["mark"]
            kind, arg = mark if mark else (None, "")
            err = None
            if b["lang"] == "cpp" and not mark:
                err = "a ```cpp block with no <!-- check: ... --> line above it (see tests/docs/snippets.py)"
            elif kind == "file":
                err = check_file(root, arg, b["lines"]) if b["lang"] in ("cpp", "cmake", "sh") else \
                    f"check: file above a ```{b['lang']} block (only cpp, cmake and sh)"
            elif kind == "excerpt":
                err = check_excerpt(root, arg, b["lines"]) if b["lang"] == "cpp" else \
                    f"check: excerpt above a ```{b['lang']} block (only cpp)"
            elif kind == "compile":
                if b["lang"] != "cpp":
                    err = f"check: compile above a ```{b['lang']} block (only cpp)"
                elif set(arg.split()) - {"f64", "body"}:
                    err = f"check: compile takes only f64 and body, not {arg!r}"
                elif MAIN.search("\n".join(b["lines"])):
                    err = PROGRAM
            elif kind == "output" and b["lang"] != "text":
                err = f"check: output above a ```{b['lang']} block (only text)"
            if err:
                errors += 1
                print(f"{where}: {err}")
        # a check line that is misspelt or not directly above a fence would check nothing
        used = {b["line"] - 1 for b in blocks(readme) if b["mark"]}
        for n, line in enumerate(readme.read_text().splitlines(), 1):
            if re.match(r"^\s*<!--\s*check\b", line) and n not in used:
                errors += 1
                print(f"{rel}:{n}: a check line that is not of the conventions or not directly above a fence")
    print(f"snippets: {errors} error(s)")
    return 1 if errors else 0


def write_if_changed(path, text):
    """Leaves an unchanged file alone, so that editing one README recompiles only its snippets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def extract(root, outdir, given=()):
    """One .cpp per compile block under OUTDIR/float or OUTDIR/f64. A #line directive points the
    compiler's messages at the README's own lines. An unmarked ```cpp block becomes an #error, so
    that the build fails on it too."""
    wanted = set()
    for readme in readmes(root, given):
        rel = relname(root, readme)
        for b in blocks(readme):
            mark, flavour, text = b["mark"], "float", None
            stem = re.sub(r"\W", "_", rel) + f"_{b['line']}"
            if b["lang"] == "cpp" and not mark:
                text = f'#error "{rel}:{b["line"]}: a ```cpp block with no <!-- check: ... --> line above it"\n'
            elif mark and mark[0] == "compile" and b["lang"] == "cpp" and MAIN.search("\n".join(b["lines"])):
                text = f'#error "{rel}:{b["line"]}: {PROGRAM}"\n'
            elif mark and mark[0] == "compile" and b["lang"] == "cpp":
                opts = mark[1].split()
                flavour = "f64" if "f64" in opts else "float"
                code = "\n".join(b["lines"])
                line = f'#line {b["line"] + 1} "{rel}"\n'
                text = PRELUDE + (f"void doc_snippet_{stem}() {{\n{line}{code}\n}}\n" if "body" in opts
                                  else f"{line}{code}\n")
            if text is not None:
                path = outdir / flavour / f"{stem}.cpp"
                write_if_changed(path, text)
                wanted.add(path)
    for old in outdir.glob("*/*.cpp"):  # a block that was removed or moved
        if old not in wanted:
            old.unlink()
    for p in sorted(wanted):
        print(p.as_posix())
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(check(pathlib.Path(sys.argv[2]).resolve(), sys.argv[3:]))
    if len(sys.argv) >= 4 and sys.argv[1] == "extract":
        sys.exit(extract(pathlib.Path(sys.argv[2]).resolve(), pathlib.Path(sys.argv[3]).resolve(), sys.argv[4:]))
    sys.exit(__doc__)
