#!/usr/bin/python3
"""Time, in one place (issue 35, item 7): code under src/ reads and waits on time through core/clock.h
(a Clock, or MonotonicSeconds / WallSeconds where it only measures), never through the standard
library's clocks or sleeps directly, so that code whose behaviour depends on time can be handed a
SimulatedClock. As Envoy's check_format does, this rejects steady_clock, system_clock and
high_resolution_clock (their now(), and aliases of them), sleep_for, sleep_until, sleep, usleep and
nanosleep outside src/core/clock.*.
Comments and string literals are not code. Prints each offender with its file and line; exits 1 when
there is one.

usage: clock_lint.py SRC_DIR [--self-test]
  --self-test  also checks that a planted call in a synthetic tree is caught, and that the same words
               in a comment or a string and the allowed file are not (so this test can fail).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lint_lib  # noqa: E402
from lint_lib import forbidden_calls  # noqa: E402

FORBIDDEN = re.compile(r"\b(steady_clock|system_clock|high_resolution_clock|sleep_for|sleep_until|usleep|nanosleep)\b"
                       r"|(?<![.\w>])(sleep)\s*\(")
ALLOWED = ("core/clock.h", "core/clock.cc")


def offenders(src):
    return forbidden_calls(src, FORBIDDEN, ALLOWED, lambda what: f"{what} (use a Clock from core/clock.h: Clock::Real(), "
                           "or the caller's, so a test can simulate it)")


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "core"))
        os.makedirs(os.path.join(d, "agent"))
        open(os.path.join(d, "core", "clock.cc"), "w").write("void S() { std::this_thread::sleep_for(x); }\n")
        open(os.path.join(d, "agent", "ok.cc"), "w").write(
            '// no std::this_thread::sleep_for here\nconst char* s = "steady_clock::now";\nvoid F() { clock.SleepFor(1); }\n')
        open(os.path.join(d, "agent", "bad.cc"), "w").write(
            "using C = std::chrono::system_clock;\nvoid F() {\n  auto t = std::chrono::steady_clock::now();\n"
            "  std::this_thread::sleep_for(ms);\n  ::usleep(5);\n  sleep(1);\n  x.sleep(2);\n}\n")
        bad = offenders(d)
        want = 5
        if len(bad) != want or not all("bad.cc" in b for b in bad):
            print(f"self-test: expected {want} offenders in agent/bad.cc, got {bad}", file=sys.stderr)
            return False
    return True


if __name__ == "__main__":
    sys.exit(lint_lib.main(offenders, self_test, "clock lint", "direct clock or sleep call(s) outside core/clock"))
