"""What the call lints of tests/layout share (clock_lint.py, abort_lint.py): every .cc, .h, .cu and
.cuh file under a source folder, with comments and string literals blanked (code_shape.strip, lines
kept), searched line by line for a forbidden pattern outside the files allowed it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from code_shape import strip  # noqa: E402


def forbidden_calls(src, pattern, allowed, advice):
    """Each 'path:line: <what matched> (advice)' in src; what matched is the pattern's first
    non-empty group."""
    bad = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".cc", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, f)
            if os.path.relpath(path, src).replace(os.sep, "/") in allowed:
                continue
            for ln, row in enumerate(strip(open(path, encoding="utf-8").read()).split("\n"), 1):
                m = pattern.search(row)
                if m:
                    what = next(g for g in m.groups() if g)
                    bad.append(f"{path}:{ln}: {advice(what)}")
    return bad


def main(offenders, self_test, name, what):
    """A lint's command line: SRC_DIR [--self-test]; prints each offender, then "name: N what in SRC_DIR"."""
    args = sys.argv[1:]
    if "--self-test" in args and not self_test():
        return 1
    bad = offenders(args[0])
    for b in bad:
        print(b)
    print(f"{name}: {len(bad)} {what} in {args[0]}")
    return 1 if bad else 0
