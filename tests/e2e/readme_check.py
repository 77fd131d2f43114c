#!/usr/bin/env python3
"""Runs the commands of README.md's "A real example" section as written and checks their output.

usage: readme_check.py README.md WORKDIR            run them in WORKDIR (anneal on PATH)
       readme_check.py --self-test                  the matcher catches what it must

Every line of the section's fenced blocks that starts with "$ " is a command, run with bash in
WORKDIR (stdout and stderr together); the lines after it, up to the next command, are its expected
output. They must match the actual lines in order, where
  - a line "..." stands for any number of lines (also none), and a line ending in "..." for any
    line that starts as it does;
  - a progress bar's "[####]" (drawn on a terminal only) is left out of both;
  - words are compared exactly; a number must be equal, except the measured ones (followed by ms,
    s, MB/s, tok/s, GFLOP/s, %, or "threads") and hexadecimal floats, which may be anything, and
    decimal fractions, which may differ in their last printed digit (the kernels' sums depend on
    the thread count by an ulp or so).
Any other difference fails the command, printing both.
"""
import re
import subprocess
import sys

NUM = re.compile(r"0x[0-9a-f]+(?:\.[0-9a-f]*)?p[-+]?\d+|\d+(?:\.\d+)?(?:e[-+]?\d+)?")
MEASURED = re.compile(r"^ ?(ms|s|MB/s|tok/s|GFLOP/s|%|threads)(?![A-Za-z0-9])")
BAR = re.compile(r"\[#*[ .]*\] ")


def tokens(line):
    """The line as (kind, text, following text): kind 'n' for a number, 't' for the text between."""
    out, pos = [], 0
    for m in NUM.finditer(line):
        if m.start() > pos:
            out.append(("t", line[pos:m.start()]))
        out.append(("n", m.group()))
        pos = m.end()
    if pos < len(line):
        out.append(("t", line[pos:]))
    return out


def number_matches(want, got, after):
    if want.startswith("0x") or MEASURED.match(after):
        return NUM.fullmatch(got) is not None
    if want == got:
        return True
    if "." in want and "." in got and "e" not in want:
        places = len(want.split(".")[1])
        return len(got.split(".")[1]) == places and abs(float(want) - float(got)) <= 1.5 * 10 ** -places
    return False


def line_matches(want, got):
    want, got = BAR.sub("", want), BAR.sub("", got)
    prefix = want.endswith("...")
    if prefix:
        want = want[:-3]
    w, g = tokens(want), tokens(got)
    if len(g) < len(w) or (not prefix and len(g) != len(w)):
        return False
    for i, (wk, wt) in enumerate(w):
        gk, gt = g[i]
        if wk != gk:
            return False
        if wk == "t":
            if not (gt.startswith(wt) if prefix and i == len(w) - 1 else gt == wt):
                return False
            continue
        after = w[i + 1][1] if i + 1 < len(w) else (g[i + 1][1] if i + 1 < len(g) else "")
        if not number_matches(wt, gt, after):
            return False
    return True


def output_matches(want, got):
    """want's lines ("..." lines match any run of lines) against got's, all of them."""
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(want):
            r = j == len(got)
        elif want[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(got) + 1))
        else:
            r = j < len(got) and line_matches(want[i], got[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def section_commands(readme):
    text = open(readme, encoding="utf-8").read()
    start = text.index("\n## A real example")
    end = min(i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1)) if i > 0)
    cmds, in_block = [], False
    for line in text[start:end].splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            cmds.append((line[2:], []))
        elif cmds:
            cmds[-1][1].append(line)
    return cmds


def self_test():
    ok = True
    def expect(name, value):
        nonlocal ok
        if not value:
            ok = False
            print("self-test FAIL:", name)
    bar = "prep [####################] 4.3/4.3 MB, 66 docs, 1091511 tokens, 87.6 MB/s done"
    expect("a bar matches the line without it", line_matches(bar, "prep 4.3/4.3 MB, 66 docs, 1091511 tokens, 12.0 MB/s done"))
    expect("another count of docs does not", not line_matches(bar, "prep 4.3/4.3 MB, 65 docs, 1091511 tokens, 87.6 MB/s done"))
    step = "step     1/2 | loss 10.848937 (0x1.5b2a7d998p+3) | lr 5.000e-05 | grad norm 2.3513 | 1810 ms | 566 tok/s | MFU 14.9%"
    expect("timings and hex may differ", line_matches(step, step.replace("1810", "95").replace("566", "7000")
                                                     .replace("14.9", "80.1").replace("7d998", "7d9d")))
    expect("the last digit of a loss may differ", line_matches(step, step.replace("10.848937", "10.848938")))
    expect("a loss may not differ more", not line_matches(step, step.replace("10.848937", "10.848990")))
    expect("the units count may not differ", not line_matches("prep: 5 units (5 done now", "prep: 1 units (1 done now"))
    expect("a word may not differ", not line_matches("kernels cpu", "kernels ref"))
    expect("'...' at a line's end: a prefix", line_matches("model GPT-2 L=2 ...", "model GPT-2 L=2 H=4 C=128"))
    expect("... but still the prefix", not line_matches("model GPT-2 L=3 ...", "model GPT-2 L=2 H=4 C=128"))
    expect("a '...' line: any lines", output_matches(["a", "...", "d"], ["a", "b", "c", "d"]))
    expect("... also none", output_matches(["a", "...", "d"], ["a", "d"]))
    expect("a missing line fails", not output_matches(["a", "b"], ["a"]))
    expect("an extra line fails", not output_matches(["a"], ["a", "b"]))
    return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        return 0 if self_test() else 1
    readme, workdir = sys.argv[1], sys.argv[2]
    cmds = section_commands(readme)
    if len(cmds) < 5:
        print(f"found only {len(cmds)} commands in README.md's 'A real example'")
        return 1
    failed = 0
    for cmd, want in cmds:
        p = subprocess.run(["bash", "-c", cmd], cwd=workdir, capture_output=True, text=True, timeout=120)
        # stderr (a progress line) first, as on a terminal, where it comes before the summary.
        got = (p.stderr + p.stdout).splitlines()
        if p.returncode == 0 and output_matches(want, got):
            print(f"ok   $ {cmd}")
            continue
        failed += 1
        print(f"FAIL $ {cmd} (exit {p.returncode})\n  README.md shows:")
        for line in want:
            print("    " + line)
        print("  it printed:")
        for line in got:
            print("    " + line)
    print(f"{len(cmds) - failed} of {len(cmds)} README commands as shown")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
