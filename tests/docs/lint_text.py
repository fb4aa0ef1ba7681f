#!/usr/bin/env python3
"""The study text's budget, checked by ctest (docs_lint).

    python3 tests/docs/lint_text.py [ROOT]      ROOT: the source tree (default: two levels up)

Fails (exit 1, one line per finding) when
  * comment lines are more than 20% of the library's lines (core/, nn/, optim/, distributed/, .hpp and .cpp);
  * a library header has more than three comment lines per line of code;
  * a library comment quotes a timing or throughput ("1.2 ms", "37 steps/s", "102 GFLOP/s"), a
    profile share ("35% of the step"), a benchmark workload ("bench/ W1") or a measurement: measured speed lives in bench/README.md and commit messages;
  * a library comment, README.md or an example's README names an issue ("issue 12", "#80") of this
    project, or a commit hash;
  * a test source (tests/**/*.cpp, *.hpp) is longer than 700 lines.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
LIBRARY_DIRS = ("core", "nn", "optim", "distributed")
COMMENT_SHARE_MAX = 0.20
HEADER_COMMENT_PER_CODE_MAX = 3.0
TEST_FILE_LINES_MAX = 700

# A bare "s" needs a space or a decimal point before it: "0s and 1s" are digits, not seconds.
TIMING = re.compile(r"\b\d[\d,.]*\s?(?:ns|µs|us|ms|GFLOP/s|GB/s|steps/s|tokens/s)\b(?![\w(])"
                    r"|\b(?:\d[\d,.]*\s|\d+\.\d+)s\b(?![\w(])"
                    r"|\b\d[\d.]*\s?%\s+of\s+(?:the\s+)?(?:time|step|wall|run)"
                    r"|\bbench/?\s*(?:workload\s*)?[WT]\d|\bperf\b|\bmeasured\b")
ISSUE = re.compile(r"\bissue\s+#?\d+|(?<![\w/&])#\d{1,4}\b", re.IGNORECASE)
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# Upstream issue references are citations, not this project's history.
UPSTREAM = re.compile(r"(pytorch|xtensor|xsimd|openblas|gcc|llvm|catch2|nanogpt|llm\.c)[\w\-/ ]*(#|issue\s+)\d+",
                      re.IGNORECASE)


def split_lines(text):
    """(line number, is_comment, comment_text) for every non-blank line of a C++ file."""
    out, in_block = [], False
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if in_block:
            out.append((n, True, s))
            in_block = "*/" not in s
        elif s.startswith("//"):
            out.append((n, True, s[2:]))
        elif s.startswith("/*"):
            out.append((n, True, s))
            in_block = "*/" not in s
        else:
            comment = s.split("//", 1)[1] if "//" in s and '"' not in s.split("//", 1)[0] else ""
            out.append((n, False, comment))
    return out


def history(text):
    text = UPSTREAM.sub("", text)
    return ISSUE.search(text) or HASH.search(text)


def main():
    findings = []
    total = comments = 0
    for d in LIBRARY_DIRS:
        for f in sorted((ROOT / d).glob("*.[ch]pp")):
            rel = f.relative_to(ROOT)
            lines = split_lines(f.read_text())
            n_comment = sum(1 for _, c, _ in lines if c)
            n_code = len(lines) - n_comment
            total += len(f.read_text().splitlines())
            comments += n_comment
            if f.suffix == ".hpp" and n_comment > HEADER_COMMENT_PER_CODE_MAX * max(n_code, 1):
                findings.append(f"{rel}: {n_comment} comment lines against {n_code} of code (more than 3 to 1)")
            for n, _, text in lines:
                if not text:
                    continue
                m = TIMING.search(text)
                if m:
                    findings.append(f"{rel}:{n}: a timing in a comment ({m.group(0)!r}); it belongs in bench/README.md")
                h = history(text)
                if h:
                    findings.append(f"{rel}:{n}: history in a comment ({h.group(0)!r})")
    share = comments / max(total, 1)
    if share > COMMENT_SHARE_MAX:
        findings.append(f"library: {comments} comment lines of {total} ({share:.1%}); the budget is "
                        f"{COMMENT_SHARE_MAX:.0%}")
    docs = [ROOT / "README.md", ROOT / "distributed" / "README.md", *sorted((ROOT / "examples").glob("**/README.md"))]
    for f in docs:
        in_fence = False
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_fence = not in_fence
            h = history(line)
            if h:
                findings.append(f"{f.relative_to(ROOT)}:{n}: history in a doc ({h.group(0)!r})")
    for f in sorted((ROOT / "tests").glob("**/*.[ch]pp")):
        n = len(f.read_text().splitlines())
        if n > TEST_FILE_LINES_MAX:
            findings.append(f"{f.relative_to(ROOT)}: {n} lines; split it by topic (at most {TEST_FILE_LINES_MAX})")
    for line in findings:
        print(line)
    print(f"library: {total} lines, {comments} comment lines ({share:.1%}); {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
