"""A plain PyTorch DDP training script (gloo backend) that knows nothing about anneal: it reads the
torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and, as a script written for a
managed training service would, saves checkpoints to $ANNEAL_CHECKPOINT_DIR (falling back to
./checkpoints) and resumes from the newest one there. The same file runs under torchrun.

    python3 train.py --epochs 3 --lr 0.05
"""
import argparse
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()

    dist.init_process_group("gloo")  # env:// rendezvous from MASTER_ADDR / MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

    ckpt_dir = os.environ.get("ANNEAL_CHECKPOINT_DIR", "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    start_epoch = 0
    saved = sorted(f for f in os.listdir(ckpt_dir) if f.startswith("epoch-") and f.endswith(".pt"))
    if saved:
        state = torch.load(os.path.join(ckpt_dir, saved[-1]))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start_epoch = state["epoch"] + 1
        print(f"rank {rank}: resumed from {saved[-1]}", flush=True)

    # A fixed synthetic regression task; each rank takes its share of every global batch.
    g = torch.Generator().manual_seed(1234)
    w_true = torch.randn(16, 1, generator=g)
    for epoch in range(start_epoch, args.epochs):
        for step in range(args.steps_per_epoch):
            gb = torch.Generator().manual_seed(epoch * 100000 + step)
            x = torch.randn(args.batch * world, 16, generator=gb)
            y = torch.sin(x @ w_true)
            xs, ys = x[rank::world], y[rank::world]
            loss = nn.functional.mse_loss(ddp(xs), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}", flush=True)
        if rank == 0:
            path = os.path.join(ckpt_dir, f"epoch-{epoch:03d}.pt")
            torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": epoch}, path + ".tmp")
            os.replace(path + ".tmp", path)
            print(f"saved {path}", flush=True)
        dist.barrier()
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in model.parameters())).hexdigest()
    print(f"rank {rank} of {world}: final parameters sha256 {digest}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
