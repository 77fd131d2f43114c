#!/usr/bin/python3
"""Layers enforced (issue 17): every #include between folders of src/ and every third-party header
must be allowed by the layer table of docs/architecture.md ("## Layers"), and each folder's USES list
in src/CMakeLists.txt must be exactly its row. Prints each offender; exits 1 when there is one.

usage: include_layers.py REPO_ROOT [--self-test]
  --self-test  first runs the check on a copy of src/ with a forbidden include of each kind added
               (kernels/ including model/, model/ including curl) and a USES list widened, and fails
               unless each is reported — so this test can fail.
"""
import os
import re
import shutil
import sys
import tempfile

# Third-party headers the project uses; any of them must appear in the including folder's row.
THIRD_PARTY = re.compile(r"^(xxhash\.h|openssl/|nlohmann/|curl/|cblas\.h|omp\.h|gloo/|nccl\.h|cuda|cublas|"
                         r"cudnn|zlib\.h|yaml-cpp/|httplib\.h|sqlite3\.h|CLI/|gtest/|gmock/)")


def layer_table(doc):
    text = open(doc, encoding="utf-8").read()
    sec = text.split("\n## Layers\n", 1)
    if len(sec) != 2:
        raise SystemExit(f"{doc}: no '## Layers' section")
    body = sec[1].split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("folder", "") or set(cells[0]) <= set("- "):
            continue
        uses = set() if cells[1] in ("—", "-") else {u.strip() for u in cells[1].split(",")}
        libs = set() if cells[2] in ("—", "-") else {u.strip() for u in cells[2].split(",")}
        rows[cells[0]] = (uses, libs)
    return rows


def cmake_uses(path):
    text = open(path, encoding="utf-8").read()
    out = {}
    for m in re.finditer(r"anneal_folder\((\w+)(.*?)\)", text, re.S):
        words = m.group(2).split()
        uses, on = set(), False
        for w in words:
            if w in ("SOURCES", "LIBS", "PUBLIC_LIBS"):
                on = False
            elif w == "USES":
                on = True
            elif on:
                uses.add(w)
        out[m.group(1)] = uses
    return out


def check(src, doc, cmake):
    rows = layer_table(doc)
    folders = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    bad = [f"src/{f}/ has no row in the layer table of {doc}" for f in sorted(folders - set(rows))]
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".cc", ".h", ".cu", ".cuh", ".inc")):
                continue
            path = os.path.join(root, f)
            me = os.path.relpath(path, src).split(os.sep)[0]
            if me not in rows:
                continue
            uses, libs = rows[me]
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+([<"])([^>"]+)[>"]', line)
                if not m:
                    continue
                inc = m.group(2)
                where = f"{os.path.relpath(path, os.path.dirname(src))}:{n}"
                if m.group(1) == '"' and "/" in inc and inc.split("/")[0] in folders:
                    other = inc.split("/")[0]
                    if other != me and "everything" not in uses and other not in uses:
                        bad.append(f"{where}: {me}/ includes \"{inc}\" but may include only {sorted(uses) or 'none'}")
                elif m.group(1) == "<" and THIRD_PARTY.match(inc):
                    if not any(inc == l or (l.endswith("/") and inc.startswith(l)) for l in libs):
                        bad.append(f"{where}: {me}/ includes <{inc}>, not among its third-party headers {sorted(libs)}")
    for name, uses in sorted(cmake_uses(cmake).items()):
        want = rows.get(name, (None,))[0]
        if want is None:
            bad.append(f"{cmake}: anneal_{name} has no row in the layer table")
        elif uses != want:
            bad.append(f"{cmake}: anneal_{name} USES {sorted(uses)}, the layer table says {sorted(want)}")
    return bad


def self_test(root):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        shutil.copytree(os.path.join(root, "src"), src)
        with open(os.path.join(src, "kernels", "registry.cc"), "a") as f:
            f.write('#include "model/decoder.h"\n')
        with open(os.path.join(src, "model", "box.cc"), "a") as f:
            f.write("#include <curl/curl.h>\n")
        cm = os.path.join(src, "CMakeLists.txt")
        text = open(cm).read().replace("anneal_folder(tensor\n", "anneal_folder(tensor\n  USES storage\n", 1)
        open(cm, "w").write(text)
        bad = check(src, os.path.join(root, "docs", "architecture.md"), cm)
        want = ['kernels/ includes "model/decoder.h"', "model/ includes <curl/curl.h>", "anneal_tensor USES"]
        missing = [w for w in want if not any(w in b for b in bad)]
        if missing or len(bad) != 3:
            print(f"self-test: expected exactly {want}, got {bad}", file=sys.stderr)
            return False
    return True


def main():
    root = sys.argv[1]
    if "--self-test" in sys.argv[2:] and not self_test(root):
        return 1
    bad = check(os.path.join(root, "src"), os.path.join(root, "docs", "architecture.md"),
                os.path.join(root, "src", "CMakeLists.txt"))
    for b in bad:
        print(b)
    print(f"include layers: {len(bad)} offender(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
