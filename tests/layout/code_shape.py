#!/usr/bin/python3
"""The shape of the runtime's code (issue 17): no function longer than 80 lines anywhere in src/
(model, parallel, train since issue 17, control since issue 20, every other folder since issue 35),
and no `#pragma omp` outside src/kernels (threads belong to a backend). Prints each offender with its
file, line and length; exits 1 when there is one.

usage: code_shape.py SRC_DIR [--max-lines N] [--self-test]
  --self-test  also checks that the scanner catches a long function, a long lambda-bearing method and
               a pragma in a synthetic file, and measures a short one right (so this test can fail).
"""
import os
import re
import sys

MAX_LINES = 80


def strip(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(text):
    """(name, first line, line count) of each function body at namespace or class scope."""
    code = strip(text)
    stack = []          # kinds of the open braces: "scope" (namespace/class/enum/extern) or "body" or "other"
    start = 0           # where the declaration before the next brace begins
    found = []
    for i, c in enumerate(code):
        if c in ";":
            if not any(k != "scope" for k in stack):
                start = i + 1
        elif c == "{":
            if any(k != "scope" for k in stack):
                stack.append("other")
                continue
            head = code[start:i]
            flat = " ".join(head.split())
            if re.search(r"\b(namespace|class|struct|union|enum)\b", flat) and "(" not in flat.split("{")[0].split("=")[0] \
                    or re.search(r'\bextern\s*"', flat) or re.search(r"\bnamespace\b", flat):
                stack.append("scope")
            elif re.search(r"\)\s*(const|noexcept|override|final|mutable|->[^{]*|:[^{]*|\s)*$", flat) and "=" not in flat.split("(")[0]:
                m = re.search(r"([~\w:<>]+)\s*\(", flat)
                stack.append(("body", m.group(1) if m else "?", code.count("\n", 0, i) + 1))
            else:
                stack.append("other")
            start = i + 1
        elif c == "}":
            if not stack:
                continue
            k = stack.pop()
            if isinstance(k, tuple):
                last = code.count("\n", 0, i) + 1
                found.append((k[1], k[2], last - k[2] + 1))
                k = "body"
            if not any(x != "scope" for x in stack if not isinstance(x, tuple)) and not any(isinstance(x, tuple) for x in stack):
                start = i + 1
    return found


def offenders(src, max_lines):
    bad = []
    for folder in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        for root, _, files in os.walk(os.path.join(src, folder)):
            for f in sorted(files):
                if not f.endswith((".cc", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(root, f)
                text = open(path, encoding="utf-8").read()
                for name, line, n in functions(text):
                    if n > max_lines:
                        bad.append(f"{path}:{line}: {name} is {n} lines (at most {max_lines})")
                for ln, row in enumerate(strip(text).split("\n"), 1):
                    if folder == "kernels":
                        break
                    if re.match(r"\s*#\s*pragma\s+omp\b", row) or "_Pragma(\"omp" in row:
                        bad.append(f"{path}:{ln}: #pragma omp (threads belong to a backend under kernels/)")
    return bad


def self_test(max_lines):
    import tempfile
    body = "\n".join(f"  x += {i};" for i in range(max_lines))
    long_fn = f"namespace a {{\nint Long(int x) {{\n{body}\n  return x;\n}}\n}}\n"
    method = ("struct S {\n  void M() const {\n    auto f = [&](int v) { return v; };\n" + body.replace("  x", "    f") +
              "\n  }\n};\n")
    short = "namespace a {\nclass C {\n public:\n  int Get() const { return 1; }\n};\nint Short(int x) {\n  // }{\n  return x + '}';\n}\n}\n"
    cases = [(long_fn, [("Long", 2, max_lines + 3)]), (method, [("M", 2, max_lines + 3)]),
             (short, [("Get", 4, 1), ("Short", 6, 4)])]
    ok = True
    for text, want in cases:
        got = functions(text)
        if got != want:
            print(f"self-test: measured {got}, expected {want}", file=sys.stderr)
            ok = False
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "model"))
        open(os.path.join(d, "model", "x.cc"), "w").write(long_fn + "void P() {\n#pragma omp parallel for\n}\n")
        bad = offenders(d, max_lines)
        if len(bad) != 2:
            print(f"self-test: expected a long function and a pragma, got {bad}", file=sys.stderr)
            ok = False
    return ok


def main():
    args = sys.argv[1:]
    max_lines = MAX_LINES
    if "--max-lines" in args:
        max_lines = int(args[args.index("--max-lines") + 1])
    if "--self-test" in args and not self_test(max_lines):
        return 1
    bad = offenders(args[0], max_lines)
    for b in bad:
        print(b)
    print(f"code shape: {len(bad)} offender(s) in {args[0]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
