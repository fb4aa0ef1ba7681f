#!/usr/bin/env python3
"""The checkers' own tests (ctest docs_tools), on the fixtures in tests/docs/fixtures/.

Each case gives the checker a fixture or a few output lines whose verdict is known by reading them:
a passing fixture passes, and each deliberate fault (a changed number, a drifted excerpt, an unmarked
block, a misspelt check line, extra output) is reported at its line with the token that differs."""
import contextlib
import io
import pathlib
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIX = HERE / "fixtures"
sys.path.insert(0, str(HERE))
import check_op_scopes  # noqa: E402
import check_output  # noqa: E402
import lint_text  # noqa: E402
import long_runs  # noqa: E402
import snippets  # noqa: E402

# examples/tensor_basics prints these lines (tanh(x·w) summed, and the two gradients)
TENSOR_BASICS = """Tensor(shape=(), requires_grad=true, grad_fn=sum)
-1.891762
Tensor(shape=(2, 2))
{{ 0.090353, -0.180707},
 { 0.013296, -0.026592}}
Tensor(shape=(2, 1))
{{ 0.260483},
 { 0.467782}}""".splitlines()


def quiet(f, *args):
    """(return value, printed text) of f(*args)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = f(*args)
    return r, buf.getvalue()


class Snippets(unittest.TestCase):
    def test_pass_fixture_has_no_error(self):
        rc, text = quiet(snippets.check, ROOT, [FIX / "pass.md"])
        self.assertEqual(rc, 0, text)

    def test_each_fault_reported_at_its_line(self):
        rc, text = quiet(snippets.check, ROOT, [FIX / "fail_unmarked.md"])
        self.assertEqual(rc, 1)
        lines = text.splitlines()
        self.assertIn("fail_unmarked.md:3: a ```cpp block with no <!-- check", lines[0])
        self.assertIn("fail_unmarked.md:8: line not found in tests/docs/fixtures/tiny.cpp in this order: "
                      "Tensor y = matmul(x, w).sigmoid().sum();", lines[1])
        self.assertIn("fail_unmarked.md:13: the block has 1 lines, tests/docs/fixtures/tiny.cpp has 10", lines[2])
        self.assertIn("fail_unmarked.md:17: a check line that is not of the conventions", lines[3])
        self.assertEqual(lines[4], "snippets: 4 error(s)")

    def test_a_program_marked_compile_is_an_error(self):
        rc, text = quiet(snippets.check, ROOT, [FIX / "fail_program.md"])
        self.assertEqual(rc, 1)
        lines = text.splitlines()
        self.assertIn("fail_program.md:4: a program (it defines main) is checked as a file", lines[0])
        self.assertEqual(lines[1], "snippets: 1 error(s)")
        with tempfile.TemporaryDirectory() as d:
            _, listing = quiet(snippets.extract, ROOT, pathlib.Path(d), [FIX / "fail_program.md"])
            files = {pathlib.Path(p).stem.rsplit("_", 1)[1]: pathlib.Path(p) for p in listing.split()}
            program, fragment = files["4"], files["11"]  # by the line of the block's fence
            self.assertTrue(program.read_text().startswith('#error "tests/docs/fixtures/fail_program.md:4: a program'))
            self.assertIn("Tensor x = ones({2, 2});  // a fragment", fragment.read_text())

    def test_excerpt_needs_dots_to_skip(self):
        body = ["int main() {", "Tensor y = matmul(x, w).tanh().sum();"]  # not consecutive in the file
        self.assertIsNotNone(snippets.check_excerpt(ROOT, "tests/docs/fixtures/tiny.cpp", body))
        self.assertIsNone(snippets.check_excerpt(ROOT, "tests/docs/fixtures/tiny.cpp", [body[0], "...", body[1]]))

    def test_extract_wraps_bodies_and_turns_unmarked_blocks_into_errors(self):
        with tempfile.TemporaryDirectory() as d:
            _, listing = quiet(snippets.extract, ROOT, pathlib.Path(d), [FIX / "pass.md", FIX / "fail_unmarked.md"])
            names = sorted(pathlib.Path(p).relative_to(d).as_posix() for p in listing.split())
            self.assertEqual(names, ["f64/tests_docs_fixtures_pass_md_41.cpp",
                                     "float/tests_docs_fixtures_fail_unmarked_md_3.cpp",
                                     "float/tests_docs_fixtures_pass_md_28.cpp",
                                     "float/tests_docs_fixtures_pass_md_33.cpp"])
            body = (pathlib.Path(d) / names[3]).read_text()
            self.assertIn('void doc_snippet_tests_docs_fixtures_pass_md_33() {\n#line 34 "tests/docs/fixtures/pass.md"\n'
                          "Tensor x({{1, 2}, {3, 4}}, true);", body)
            self.assertTrue((pathlib.Path(d) / names[1]).read_text().startswith("#error"))


class Output(unittest.TestCase):
    def test_pass_fixture_matches_the_real_output(self):
        (_, _, cmd, tol, doc, first), = check_output.output_blocks(ROOT, [FIX / "pass.md"])
        self.assertEqual((cmd, tol, first), ("examples/tensor_basics", 1e-3, 50))
        self.assertIsNone(check_output.match(doc, TENSOR_BASICS, tol))

    def test_changed_number_is_the_token_reported(self):
        (_, _, _, tol, doc, first), = check_output.output_blocks(ROOT, [FIX / "fail_number.md"])
        self.assertEqual(check_output.match(doc, TENSOR_BASICS, tol), (1, 1, ("-1.891763", "-1.891762")))
        self.assertEqual(first, 5)  # so the report names fail_number.md:6

    def test_tolerance_is_relative(self):
        self.assertIsNone(check_output.token_diff("loss 2.300", "loss 2.302", 1e-3))
        self.assertEqual(check_output.token_diff("loss 2.300", "loss 2.304", 1e-3), ("2.300", "2.304"))
        self.assertIsNone(check_output.token_diff("(1,234.0,", "(1,234.5,", 1e-3))
        self.assertEqual(check_output.token_diff("(1,234.0,", "[1,234.0,", 1e-3), ("(1,234.0,", "[1,234.0,"))

    def test_times_and_eta_are_not_compared(self):
        doc = "step 100 loss 2.31 | 12.5 ms/step, 80 steps/s, 3.0s ETA 1:02"
        out = "step 100 loss 2.31 | 99.1 ms/step, 11 steps/s, 9.9s ETA 7:45"
        self.assertIsNone(check_output.token_diff(doc, out, 0))
        self.assertEqual(check_output.token_diff(doc, out.replace("2.31", "2.32"), 0), ("2.31", "2.32"))

    def test_dots_skip_and_the_end_is_anchored(self):
        self.assertIsNone(check_output.match(["a 1", "...", "c 3"], ["a 1", "b", "b", "c 3"], 0))
        self.assertIsNone(check_output.match(["a 1", "...", "c 3"], ["a 1", "c 3"], 0))
        self.assertEqual(check_output.match(["a 1", "c 3"], ["a 1", "c 3", "d"], 0),
                         (1, 2, ("(end of the doc block)", "more output")))
        self.assertEqual(check_output.match(["a 1", "c 3"], ["a 1"], 0), (1, None, ("c", "(end of output)")))


class LongRuns(unittest.TestCase):
    def test_fixture_regions_are_rewritten_with_their_choice_of_lines(self):
        with tempfile.TemporaryDirectory() as d:
            md = pathlib.Path(d) / "long_run.md"
            md.write_text((FIX / "long_run.md").read_text())
            self.assertEqual(long_runs.rewrite(md, "tensor_basics", TENSOR_BASICS, "examples/tensor_basics"), 2)
            text = md.read_text()
            self.assertIn("```text\n$ examples/tensor_basics\n-1.891762\n...\n { 0.467782}}\n```\nMeasured on ", text)
            self.assertIn("```text\nTensor(shape=(), requires_grad=true, grad_fn=sum)\nTensor(shape=(2, 2))\n"
                          "Tensor(shape=(2, 1))\n```\nMeasured on ", text)
            self.assertEqual(text.count("Measured on "), 2)
            self.assertNotIn("old machine", text)
            self.assertIn("UTC: `examples/tensor_basics`.\n<!-- /long-run -->", text)

    def test_a_line_gone_from_the_output_stops_the_rewrite(self):
        with self.assertRaises(SystemExit):
            long_runs.excerpt(["step 10 loss 2.0"], TENSOR_BASICS, None, "x.md:1")


class Aesthetics(unittest.TestCase):
    def test_function_length_from_signature_to_brace_with_lambdas_inside(self):
        body = "\n".join(f"    int v{i} = {i};" for i in range(76))
        text = ("#include <x>\nnamespace a {\nstruct S {\n    int f() const { return 1; }\n};\n"
                "// a comment with { and }\n"
                f"int g(int x)\n{{\n    auto h = [&](int y) {{\n        return y + '}}';\n    }};\n{body}\n"
                "    return h(x);\n}\n}  // namespace a\n")
        found = [(first, last, head.split("(")[0]) for first, last, head in lint_text.functions(text)]
        self.assertEqual(found, [(4, 4, "int f"), (7, 89, "int g")])  # 83 lines: 7 to 89

    def test_opening_comment_lines_stop_at_the_first_code(self):
        self.assertEqual(lint_text.opening_comment_lines("// a\n\n// b\n#pragma once\n// c\n"), 2)

    def test_files_named_in_prose(self):
        line = "2. `core/autograd.cpp`, `nn/attention/composed.cpp`; `make test`, `out/`, `<xgrad/xgrad.hpp>`"
        self.assertEqual(lint_text.NAMED_FILE.findall(line), ["core/autograd.cpp", "nn/attention/composed.cpp"])

    def test_findings_on_a_tree(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            (root / "core" / "detail").mkdir(parents=True)
            (root / "examples").mkdir()
            (root / "core" / "detail" / "inner.hpp").write_text('#pragma once\n#include "core/detail/other.hpp"\n')
            (root / "core" / "open.hpp").write_text("// x\n" * 16 + "#pragma once\n#include <xgrad/core/detail/inner.hpp>\n")
            (root / "examples" / "long.cpp").write_text("int main() {\n" + "    ;\n" * 79 + "}\n")
            (root / "examples" / "short.cpp").write_text("int main() {\n" + "    ;\n" * 78 + "}\n")
            (root / "cmake").mkdir()
            (root / "cmake" / "install.cmake").write_text('install(DIRECTORY core FILES_MATCHING PATTERN "*.hpp")\n')
            findings = lint_text.aesthetics(root)
            self.assertEqual(len(findings), 4, findings)
            self.assertIn('cmake/install.cmake: the headers\' install has no PATTERN "detail" EXCLUDE', findings[3])
            (root / "cmake" / "install.cmake").write_text(
                'install(DIRECTORY core FILES_MATCHING PATTERN "*.hpp" PATTERN "detail" EXCLUDE)\n')
            findings = lint_text.aesthetics(root)
            self.assertEqual(len(findings), 3, findings)
            self.assertIn("core/open.hpp: opens with 16 comment lines", findings[0])
            self.assertIn("core/open.hpp:18: a public header includes an internal one", findings[1])
            self.assertIn("examples/long.cpp:1: a function of 81 lines", findings[2])


# An op file with one op scoped, one whose scope names another op, one unscoped, one named by a
# variable and one in a comment; the check must name exactly the two lines at fault.
OPS_CPP = """Tensor add(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("add", a, b);
    return make_result(a.data() + b.data(), "add", {a, b}, nullptr);
}
Tensor sub(const Tensor& a, const Tensor& b) {
    const profiler::OpScope scope("add", a, b);
    return make_result(f(a.data(), g(b, ',')), "sub", {a, b}, nullptr);
}
Tensor neg(const Tensor& a) {
    return make_result(
        -a.data(), "neg", {a}, nullptr);
}
static Tensor tri(const Tensor& x, const char* op) {
    const profiler::OpScope scope(op, x);
    return make_result(x.data(), op, {x}, nullptr);  // make_result(y, "ignored", ...)
}
// make_result(y, "in_a_comment", {x}, nullptr);
"""


class OpScopes(unittest.TestCase):
    def test_names_each_unscoped_make_result(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            (root / "core").mkdir()
            (root / "nn").mkdir()
            (root / "core" / "ops.cpp").write_text(OPS_CPP)
            (root / "core" / "autograd.cpp").write_text('Tensor f() { return make_result(y, "unscoped", {}, nullptr); }\n')
            calls, findings = check_op_scopes.check(root)
            self.assertEqual(calls, 4)
            self.assertEqual(len(findings), 2, findings)
            self.assertTrue(findings[0].startswith('core/ops.cpp:7: make_result names "sub"'), findings[0])
            self.assertTrue(findings[1].startswith('core/ops.cpp:10: make_result names "neg"'), findings[1])
            (root / "core" / "ops.cpp").write_text(OPS_CPP.replace('scope("add", a, b);\n    return make_result(f',
                                                                   'scope("sub", a, b);\n    return make_result(f')
                                                     .replace("Tensor neg(const Tensor& a) {\n",
                                                              "Tensor neg(const Tensor& a) {\n"
                                                              "    const profiler::OpScope scope(\"neg\", a);\n"))
            self.assertEqual(check_op_scopes.check(root), (4, []))


if __name__ == "__main__":
    unittest.main(verbosity=2)
