#!/usr/bin/python3
"""Invariants report their place (issue 35, item 6): code under src/ stops on a broken invariant
through ANNEAL_CHECK or ANNEAL_FAIL (core/check.h), which print the file, the line and what failed,
never through a bare abort() or assert(), which print nothing useful in a rank's log (and assert
vanishes under NDEBUG). Bad input is a Status, not an abort. core/check.cc, the one place that
aborts, is allowed. Comments and string literals are not code. Prints each offender with its file and
line; exits 1 when there is one.

usage: abort_lint.py SRC_DIR [--self-test]
  --self-test  also checks that planted aborts and asserts in a synthetic tree are caught, and that
               the same words in a comment or a string, ANNEAL_CHECK, static_assert and the allowed
               file are not (so this test can fail).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_lib  # noqa: E402
from lint_lib import forbidden_calls  # noqa: E402

FORBIDDEN = re.compile(r"(?<![\w.>])(abort|assert)\s*\(")
ALLOWED = ("core/check.cc",)


def offenders(src):
    return forbidden_calls(src, FORBIDDEN, ALLOWED, lambda what: f"bare {what}() (use ANNEAL_CHECK(cond, message) from "
                           "core/check.h, or return a Status for bad input)")


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "core"))
        os.makedirs(os.path.join(d, "model"))
        open(os.path.join(d, "core", "check.cc"), "w").write("void F() { std::abort(); }\n")
        open(os.path.join(d, "model", "ok.cc"), "w").write(
            '// never std::abort() here\nconst char* s = "assert(x)";\nvoid F() { ANNEAL_CHECK(x, "y"); }\n'
            "static_assert(sizeof(int) == 4, \"int\");\nvoid G() { task.abort(); }\n")
        open(os.path.join(d, "model", "bad.cc"), "w").write(
            "void F() {\n  if (!p) std::abort();\n  assert(n > 0);\n  abort ();\n}\n")
        bad = offenders(d)
        if len(bad) != 3 or not all("bad.cc" in b for b in bad):
            print(f"self-test: expected 3 offenders in model/bad.cc, got {bad}", file=sys.stderr)
            return False
    return True


if __name__ == "__main__":
    sys.exit(lint_lib.main(offenders, self_test, "abort lint", "bare abort() or assert() call(s) outside core/check.cc"))
