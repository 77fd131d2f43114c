#!/usr/bin/python3
"""One op vocabulary (issue 35, item 6): every kernel of the host backends' KernelTable
(src/kernels/ops.h) is named as its op is in OpName() (src/tensor/backend.cc), the names the op time
tables, the cost model and the parity harness print. Before, five of the table's kernels had names
of their own (encoder_forward for embedding_forward, matmul_forward for linear_forward, ...). Prints
each kernel whose name is no op's; exits 1 when there is one.

usage: op_vocabulary.py SRC_DIR [--self-test]
  --self-test  also checks that a planted kernel name outside the vocabulary is caught and a table
               of the vocabulary's names is not (so this test can fail).
"""
import os
import re
import sys

KERNEL = re.compile(r"^\s*[\w:<>*\s]+\(\*(\w+)\)\(", re.M)
NAMES = re.compile(r"kNames\[\]\s*=\s*\{(.*?)\};", re.S)


def offenders(ops_h, backend_cc):
    names = set(re.findall(r'"(\w+)"', NAMES.search(backend_cc).group(1)))
    kernels = KERNEL.findall(ops_h)
    if not kernels:
        return ["no kernels found in the KernelTable: the scanner is out of date"]
    return [f"KernelTable::{k} is not an op of OpName() (tensor/backend.cc): name it as its op" for k in kernels
            if k not in names]


def self_test():
    backend = 'const char* OpName(Op op) {\n  static const char* const kNames[] = {\n  "linear_forward", "scale"};\n'
    good = "struct KernelTable {\n  void (*linear_forward)(float* out, int N);\n  void (*scale)(float* g, float s);\n};\n"
    bad = good.replace("linear_forward", "matmul_forward")
    ok = offenders(good, backend) == [] and len(offenders(bad, backend)) == 1 and "matmul_forward" in offenders(bad, backend)[0]
    if not ok:
        print("op vocabulary self-test FAILED: a planted kernel name was not caught, or a good one was")
    return ok


def main():
    args = sys.argv[1:]
    if "--self-test" in args and not self_test():
        return 1
    src = args[0]
    with open(os.path.join(src, "kernels/ops.h")) as f:
        ops_h = f.read()
    with open(os.path.join(src, "tensor/backend.cc")) as f:
        backend_cc = f.read()
    bad = offenders(ops_h, backend_cc)
    for b in bad:
        print(b)
    print(f"op vocabulary: {len(KERNEL.findall(ops_h))} kernels, {len(bad)} named outside OpName()")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
