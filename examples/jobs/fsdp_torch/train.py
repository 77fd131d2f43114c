"""A plain PyTorch FSDP training script (FSDP2's fully_shard over gloo, on the CPU) that knows nothing
about anneal: it reads the torchrun environment, shards parameters, gradients and AdamW's state across
the ranks, and saves sharded checkpoints with torch.distributed.checkpoint (each rank writes its own
shard) to $ANNEAL_CHECKPOINT_DIR (falling back to ./checkpoints), resuming from the newest complete
one. At the end rank 0 gathers the full model and optimizer state and saves it as final-state.pt
beside the checkpoints. Needs PyTorch >= 2.6 (tools/venv has it). The same file runs under torchrun.

    python train.py --epochs 4 --lr 0.003

--pause-after-epoch N (a run that started from scratch only): after saving epoch N's checkpoint
every rank prints "paused after epoch N" and sleeps, so that a fault test can kill a rank at a known
point; a run that resumed from a checkpoint does not pause.
"""
import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict, set_state_dict)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):  # x: (N, dim)
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def complete_epochs(ckpt_dir, world):
    """Epochs whose checkpoint every rank finished (a done-rank-R file per rank, written after dcp.save)."""
    done = []
    for name in os.listdir(ckpt_dir):
        path = os.path.join(ckpt_dir, name)
        if name.startswith("epoch-") and os.path.isdir(path):
            if all(os.path.exists(os.path.join(path, f"done-rank-{r}")) for r in range(world)):
                done.append(int(name[len("epoch-"):]))
    return sorted(done)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps-per-epoch", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--pause-after-epoch", type=int, default=-1)
    args = p.parse_args()

    dist.init_process_group("gloo")  # env:// rendezvous from MASTER_ADDR / MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(args.dim) for _ in range(args.layers)], nn.Linear(args.dim, 1))
    for block in model[:-1]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    ckpt_dir = os.environ.get("ANNEAL_CHECKPOINT_DIR", "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    start_epoch = 0
    done = complete_epochs(ckpt_dir, world)
    if done:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=os.path.join(ckpt_dir, f"epoch-{done[-1]:03d}"))
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        start_epoch = done[-1] + 1
        print(f"rank {rank}: resumed from epoch-{done[-1]:03d}", flush=True)

    g = torch.Generator().manual_seed(1234)  # a fixed synthetic regression task
    w_true = torch.randn(args.dim, 1, generator=g)
    from_scratch = start_epoch == 0
    for epoch in range(start_epoch, args.epochs):
        for step in range(args.steps_per_epoch):
            gb = torch.Generator().manual_seed(epoch * 100000 + step)
            x = torch.randn(args.batch * world, args.dim, generator=gb)
            y = torch.sin(x @ w_true)
            xs, ys = x[rank::world], y[rank::world]  # each rank's share of the global batch
            loss = nn.functional.mse_loss(model(xs), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}", flush=True)
        path = os.path.join(ckpt_dir, f"epoch-{epoch:03d}")
        msd, osd = get_state_dict(model, opt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
        open(os.path.join(path, f"done-rank-{rank}"), "w").close()
        print(f"rank {rank}: saved {path}", flush=True)
        if epoch == args.pause_after_epoch and from_scratch:
            print(f"rank {rank}: paused after epoch {epoch}", flush=True)
            time.sleep(600)
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    msd, osd = get_state_dict(model, opt, options=full)  # collective: every rank takes part
    if rank == 0:
        torch.save({"model": msd, "optim": osd}, os.path.join(ckpt_dir, "final-state.pt.tmp"))
        os.replace(os.path.join(ckpt_dir, "final-state.pt.tmp"), os.path.join(ckpt_dir, "final-state.pt"))
        digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in msd.values())).hexdigest()
        print(f"rank 0 of {world}: final parameters sha256 {digest}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
