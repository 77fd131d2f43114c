#!/usr/bin/python3
"""One definition per name (issue 35, item 6): no two class, struct, union or enum types of the same
name are defined at namespace scope in src/ (outside anonymous namespaces). All of src/ links into
one binary, and two classes of one name with inline members (there were two anneal::Backend: the
compute one in tensor/backend.h and the instance provider's) break the one-definition rule
silently: the linker keeps one body of each inline function for both. Prints each clash with both
places; exits 1 when there is one.

usage: one_definition.py SRC_DIR [--self-test]
  --self-test  also checks that two definitions of one name in a synthetic tree are caught, and that
               forward declarations, nested classes and anonymous-namespace classes are not (so this
               test can fail).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from code_shape import strip  # noqa: E402  (comments and literals blanked, lines kept)

TYPE = re.compile(r"(?:^|[\s;])(?:template\s*<[^>]*>\s*)?(?:enum\s+(?:class|struct)|class|struct|union|enum)\s+"
                  r"(?:alignas\s*\([^)]*\)\s*)?([\w:]+)(?:\s+final)?\s*(?::(?!:)[^{]*)?$")


def definitions(text):
    """(qualified name, line) of each type defined at namespace scope outside anonymous namespaces."""
    code = strip(text)
    stack, start, found = [], 0, []
    for i, c in enumerate(code):
        if c == ";":
            start = i + 1
        elif c == "{":
            head = " ".join(code[start:i].split())
            ns = re.search(r"\bnamespace\s+([\w:]+)\s*$", head)
            if re.search(r"\bnamespace\s*$", head):
                stack.append("anon")
            elif ns:
                stack.append(("ns", ns.group(1)))
            elif re.search(r'\bextern\s*"', head):
                stack.append(("ns", ""))
            else:
                m = TYPE.search(" " + head)
                # A nested class defined out of line (struct A::B {) belongs to A.
                if m and "::" not in m.group(1) and all(isinstance(k, tuple) for k in stack) and \
                        "(" not in head.split(m.group(1))[0].split("<")[0]:
                    scope = "::".join(k[1] for k in stack if k[1])
                    found.append(((scope + "::" if scope else "") + m.group(1), code.count("\n", 0, i) + 1))
                stack.append("other")
            start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            start = i + 1
    return found


def clashes(src):
    where = {}
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith((".cc", ".h", ".cu", ".cuh")):
                path = os.path.join(root, f)
                for name, line in definitions(open(path, encoding="utf-8").read()):
                    where.setdefault(name, []).append(f"{path}:{line}")
    return {n: w for n, w in sorted(where.items()) if len(w) > 1}


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "a"))
        os.makedirs(os.path.join(d, "b"))
        open(os.path.join(d, "a", "x.h"), "w").write(
            "namespace anneal {\nclass Backend {\n public:\n  virtual int f() { return 1; }\n  struct Inner {};\n};\n"
            "class Forward;\nnamespace {\nstruct Local {};\n}\ntemplate <typename T>\nclass Box : public Base<T> {};\n"
            "namespace trace {\nclass Span {};\n}\n}\n")
        open(os.path.join(d, "b", "y.h"), "w").write(
            "namespace anneal {\nclass Backend {\n  int g();\n};\nstruct Inner {};\nclass Forward;\n"
            "namespace {\nstruct Local {};\n}\nvoid F() { struct Box {}; }\nstruct Backend::Impl {};\n"
            "namespace device_trace {\nclass Span {};\n}\n}\n")
        got = clashes(d)
        if sorted(got) != ["anneal::Backend"]:
            print(f"self-test: expected a clash of anneal::Backend only, got {got}", file=sys.stderr)
            return False
    return True


def main():
    args = sys.argv[1:]
    if "--self-test" in args and not self_test():
        return 1
    bad = clashes(args[0])
    for name, places in bad.items():
        print(f"{name} is defined {len(places)} times: " + ", ".join(places) +
              " (one binary: rename one, or move it into an anonymous namespace)")
    print(f"one definition: {len(bad)} name(s) defined twice in {args[0]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
