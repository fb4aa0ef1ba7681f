#!/usr/bin/env python3
"""Every op's forward is a profiler event, checked by ctest (docs_op_scopes).

    python3 tests/docs/check_op_scopes.py [ROOT]      ROOT: the source tree (default: two levels up)

An op records its result with make_result(out, NAME, inputs, backward) (core/autograd.hpp) and opens
its profiler event with `const profiler::OpScope scope(NAME, inputs...);` (core/profiler.hpp) as its
first statement. For every .cpp under core/ and nn/ (core/autograd.cpp, which defines make_result,
aside), each make_result's NAME (a string literal, or an identifier such as `op` or `name`; a
`.c_str()` after it is ignored) must be the first argument of an OpScope in the same file. Fails
(exit 1, one line per finding, file:line of the make_result) otherwise."""
import pathlib
import re
import sys

OP_DIRS = ("core", "nn")
EXCLUDED = {"core/autograd.cpp"}
MAKE_RESULT = re.compile(r"(?<![\w:])make_result\s*\(")
OP_SCOPE = re.compile(r"(?<!\w)OpScope\s+\w+\s*[({]")
LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"')
QUOTED = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""")  # a string or a character literal
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def blank_comments(text):
    """text with // and /* */ comments replaced by spaces (newlines kept, so lines still count);
    string and character literals are kept as they are."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def arguments(text, start):
    """The top-level arguments of the call whose opening bracket is at text[start], stripped."""
    close = {"(": ")", "{": "}"}[text[start]]
    args, depth, i, begin = [], 0, start + 1, start + 1
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = QUOTED.match(text, i).end()
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                if c != close:
                    break
                args.append(text[begin:i].strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    return args


def op_name(arg):
    """A make_result's or an OpScope's name argument as a key: the literal itself ("add") or the
    identifier (op); None when it is neither."""
    arg = re.sub(r"\s*\.\s*c_str\s*\(\s*\)$", "", arg)
    if LITERAL.fullmatch(arg) or IDENTIFIER.fullmatch(arg):
        return arg
    return None


def check_file(path, rel):
    """The findings of one .cpp: 'rel:line: ...' strings."""
    text = blank_comments(path.read_text())
    line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    scoped = set()
    for m in OP_SCOPE.finditer(text):
        args = arguments(text, m.end() - 1)
        if args and op_name(args[0]):
            scoped.add(op_name(args[0]))
    findings = []
    for m in MAKE_RESULT.finditer(text):
        args = arguments(text, m.end() - 1)
        if len(args) < 2:
            findings.append(f"{rel}:{line_of(m.start())}: a make_result call whose arguments could not be read")
            continue
        name = op_name(args[1])
        if name is None:
            findings.append(f"{rel}:{line_of(m.start())}: make_result's name `{args[1]}` is neither a string "
                            "literal nor an identifier; the check cannot match it to an OpScope")
        elif name not in scoped:
            findings.append(f"{rel}:{line_of(m.start())}: make_result names {name} but the file has no "
                            f"`const profiler::OpScope scope({name}, inputs...);` (the op's first statement)")
    return findings


def check(root):
    """(number of make_result calls seen, findings) for the tree at root."""
    findings, calls = [], 0
    for d in OP_DIRS:
        for f in sorted((root / d).rglob("*.cpp")):
            rel = f.relative_to(root).as_posix()
            if rel in EXCLUDED:
                continue
            calls += len(MAKE_RESULT.findall(blank_comments(f.read_text())))
            findings += check_file(f, rel)
    return calls, findings


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    calls, findings = check(root)
    for f in findings:
        print(f)
    if findings:
        print(f"check_op_scopes: {len(findings)} of {calls} make_result calls without their OpScope")
        return 1
    if calls == 0:
        print(f"check_op_scopes: no make_result call under {root}/core or {root}/nn: wrong root?")
        return 1
    print(f"check_op_scopes: {calls} make_result calls, each with its OpScope")
    return 0


if __name__ == "__main__":
    sys.exit(main())
