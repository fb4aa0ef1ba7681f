#!/usr/bin/env python3
"""The study text's budget, checked by ctest (docs_lint).

    python3 tests/docs/lint_text.py [ROOT]      ROOT: the source tree (default: two levels up)

Fails (exit 1, one line per finding) when
  * comment lines are more than 20% of the library's lines (core/, nn/, optim/, data/, train/, distributed/, text/, .hpp and .cpp);
  * a library header has more than three comment lines per line of code;
  * a library comment quotes a timing or throughput ("1.2 ms", "37 steps/s", "102 GFLOP/s"), a
    profile share ("35% of the step"), a benchmark workload ("bench/ W1") or a measurement: measured speed lives in bench/README.md and commit messages;
  * a library comment, README.md or an example's README names an issue ("issue 12", "#80") of this
    project, or a commit hash;
  * a test source (tests/**/*.cpp, *.hpp) is longer than 700 lines;
  * a function of the library or of the examples is longer than 80 lines (signature to closing brace);
  * a header of the library or of the examples opens with more than 15 comment lines (one home per
    explanation: a header points to the README section that explains);
  * a public library header includes an internal one (under a detail/ folder), or the install rules
    (cmake/install.cmake) would install the detail/ folders;
  * a README names a file (`dir/name.ext` in backquotes) that does not exist, relative to the
    source tree or to the README's folder: the reading paths name every file on them.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
LIBRARY_DIRS = ("core", "nn", "optim", "data", "train", "distributed", "text")
COMMENT_SHARE_MAX = 0.20
HEADER_COMMENT_PER_CODE_MAX = 3.0
TEST_FILE_LINES_MAX = 700
FUNCTION_LINES_MAX = 80
HEADER_OPENING_COMMENT_MAX = 15

# A bare "s" needs a space or a decimal point before it: "0s and 1s" are digits, not seconds.
TIMING = re.compile(r"\b\d[\d,.]*\s?(?:ns|µs|us|ms|GFLOP/s|GB/s|steps/s|tokens/s)\b(?![\w(])"
                    r"|\b(?:\d[\d,.]*\s|\d+\.\d+)s\b(?![\w(])"
                    r"|\b\d[\d.]*\s?%\s+of\s+(?:the\s+)?(?:time|step|wall|run)"
                    r"|\bbench/?\s*(?:workload\s*)?[WT]\d|\bperf\b|\bmeasured\b")
ISSUE = re.compile(r"\bissue\s+#?\d+|(?<![\w/&])#\d{1,4}\b", re.IGNORECASE)
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
# A file named in a README's prose: `core/autograd.cpp`, `examples/gpt/main.cpp`.
NAMED_FILE = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.(?:cpp|hpp|md|py|sh|cmake|txt))`")
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


def code_only(text):
    """text with comments, string and character literals and preprocessor lines blanked; newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text[i + 1:i + 2] == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', text[i:i + 20])
            end = ")" + m.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == "'" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append(c)  # a digit separator, 1'000
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return re.sub(r"(?m)^[ \t]*#.*(?:\\\n.*)*$", "", "".join(out))


def functions(text):
    """(first line, last line, signature) of every function body at namespace or class scope: a brace
    block whose opening text has a parenthesis and is not a namespace, class, struct, union or enum.
    Lambdas and blocks inside a function count as the function's own lines."""
    stack, found, line, head, head_line = [], [], 1, "", 1
    for c in code_only(text):
        outer = not stack or stack[-1][0] in ("namespace", "class")
        if c == "\n":
            line += 1
        if c == "{":
            if outer:
                h = re.sub(r"^template\s*<.*?>\s*", "", " ".join(head.split()))
                if re.match(r"(namespace\b|extern\s*\"\")", h):
                    kind = "namespace"
                elif re.match(r"(class|struct|union|enum)\b", h) and "(" not in h.split(":")[0]:
                    kind = "class"
                else:
                    kind = "function" if "(" in h and not h.endswith("=") else "other"
                stack.append((kind, head_line, h))
            else:
                stack.append(("inner", line, ""))
            head = ""
        elif c == "}":
            if stack:
                kind, first, h = stack.pop()
                if kind == "function":
                    found.append((first, line, h))
            head = ""
        elif c == ";" and outer:
            head = ""
        elif outer:
            if not head.strip() and not c.isspace():
                head_line = line
            head += c
            if re.search(r"\b(public|private|protected)\s*:$", head):
                head = ""
    return found


def opening_comment_lines(text):
    """The comment lines before a file's first line of code (blank lines not counted)."""
    n = 0
    for _, is_comment, _ in split_lines(text):
        if not is_comment:
            break
        n += 1
    return n


def aesthetics(root):
    """The findings on function length, header openings and the detail/ boundary."""
    findings = []
    files = [f for d in (*LIBRARY_DIRS, "examples") for f in sorted((root / d).rglob("*.[ch]pp"))]
    for f in files:
        rel, text = f.relative_to(root), f.read_text()
        for first, last, head in functions(text):
            if last - first + 1 > FUNCTION_LINES_MAX:
                findings.append(f"{rel}:{first}: a function of {last - first + 1} lines ({head[:60]}); "
                                f"split it (at most {FUNCTION_LINES_MAX})")
        if f.suffix == ".hpp":
            n = opening_comment_lines(text)
            if n > HEADER_OPENING_COMMENT_MAX:
                findings.append(f"{rel}: opens with {n} comment lines (at most {HEADER_OPENING_COMMENT_MAX}); "
                                f"point to the README section that explains")
        public = f.suffix == ".hpp" and "detail" not in f.parts and rel.parts[0] in LIBRARY_DIRS
        for n, line in enumerate(text.splitlines(), 1):
            if public and re.match(r'\s*#\s*include\s*[<"][^>"]*\bdetail/', line):
                findings.append(f"{rel}:{n}: a public header includes an internal one ({line.strip()}); "
                                f"headers under detail/ are not installed")
    install = root / "cmake" / "install.cmake"
    if install.exists() and not re.search(r'PATTERN\s+"detail"\s+EXCLUDE', install.read_text()):
        findings.append("cmake/install.cmake: the headers' install has no PATTERN \"detail\" EXCLUDE; "
                        "internal headers would be installed")
    return findings


def history(text):
    text = UPSTREAM.sub("", text)
    return ISSUE.search(text) or HASH.search(text)


def main():
    findings = []
    total = comments = 0
    for d in LIBRARY_DIRS:
        for f in sorted((ROOT / d).rglob("*.[ch]pp")):
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
    docs = [ROOT / "README.md", ROOT / "distributed" / "README.md", ROOT / "text" / "README.md", *sorted((ROOT / "examples").glob("**/README.md"))]
    for f in docs:
        in_fence = False
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_fence = not in_fence
            h = history(line)
            if h:
                findings.append(f"{f.relative_to(ROOT)}:{n}: history in a doc ({h.group(0)!r})")
            if not in_fence:
                for name in NAMED_FILE.findall(line):
                    if not (ROOT / name).exists() and not (f.parent / name).exists():
                        findings.append(f"{f.relative_to(ROOT)}:{n}: names {name}, which does not exist")
    for f in sorted((ROOT / "tests").glob("**/*.[ch]pp")):
        n = len(f.read_text().splitlines())
        if n > TEST_FILE_LINES_MAX:
            findings.append(f"{f.relative_to(ROOT)}: {n} lines; split it by topic (at most {TEST_FILE_LINES_MAX})")
    findings += aesthetics(ROOT)
    for line in findings:
        print(line)
    print(f"library: {total} lines, {comments} comment lines ({share:.1%}); {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
