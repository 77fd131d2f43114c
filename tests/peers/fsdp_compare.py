"""Compares two final-state.pt files of examples/jobs/fsdp_torch/train.py (model and AdamW state,
gathered full) with torch's own comparison, torch.testing.assert_close at rtol=0, atol=0 (bit for
bit), and the optimizer's param_groups for equality. First proves the comparison sensitive: the
second state with one element of one parameter moved by one ulp must be refused.

    tools/venv/bin/python tests/peers/fsdp_compare.py A/final-state.pt B/final-state.pt
Exit 0: equal; 1: they differ (the difference printed); 2: the self-check failed.
"""
import copy
import sys

import torch


def compare(a, b):
    torch.testing.assert_close(a["model"], b["model"], rtol=0, atol=0)
    torch.testing.assert_close(a["optim"]["state"], b["optim"]["state"], rtol=0, atol=0)
    if a["optim"]["param_groups"] != b["optim"]["param_groups"]:
        raise AssertionError("optimizer param_groups differ")


def main():
    a, b = (torch.load(p, weights_only=True) for p in sys.argv[1:3])
    moved = copy.deepcopy(b)
    name = next(iter(moved["model"]))
    t = moved["model"][name].view(-1)
    t[0] = torch.nextafter(t[0], torch.tensor(float("inf"), dtype=t.dtype))
    try:
        compare(b, moved)
        print("self-check failed: a one-ulp change of %s was not seen" % name)
        return 2
    except AssertionError:
        pass
    try:
        compare(a, b)
    except AssertionError as e:
        print("final states differ: %s" % e)
        return 1
    print("final states equal bit for bit: %d model tensors, %d optimizer states (torch %s)"
          % (len(a["model"]), len(a["optim"]["state"]), torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
