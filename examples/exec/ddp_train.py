"""A small PyTorch DDP job on CPU (gloo backend) for exec-mode node-agents: every pod of the
HyperJob, in every cluster, is one rank of one process group (``init_method="env://"`` reads
MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which the HyperJob's pytorch plugin injects).

Needs ``torch`` where the agents run (it is not a HyperJob dependency); see hyperjob-ddp.yaml.
Each rank trains a linear model on its own synthetic shard; DDP averages the gradients, so all
ranks end with identical weights, which the script checks by all-reducing a checksum.

Each rank prints one line: its rank, its cluster, its first and last loss and a digest of its
final weights (the same on every rank, byte for byte, when DDP kept them in step).
"""

from __future__ import annotations

import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(rank)  # a different data shard per rank
    true_w = torch.arange(1.0, 9.0).unsqueeze(1)
    losses = []
    for _ in range(int(os.environ.get("DDP_STEPS", "200"))):
        x = torch.randn(64, 8, generator=generator)
        loss = torch.nn.functional.mse_loss(model(x), x @ true_w)
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients across every rank here
        optimizer.step()
        losses.append(loss.item())
    checksum = torch.tensor([float(sum(p.detach().sum() for p in model.parameters()))])
    mine = checksum.clone()
    dist.all_reduce(checksum)
    same = abs(checksum.item() / world - mine.item()) < 1e-4
    exact = repr([p.detach().flatten().tolist() for p in model.parameters()])  # every bit of every weight
    digest = hashlib.sha256(exact.encode()).hexdigest()[:16]
    print(f"rank {rank}/{world} cluster {os.environ.get('HYPERJOB_CLUSTER', '?')}: "
          f"loss {losses[0]:.5f} -> {losses[-1]:.5f} weights {digest} "
          f"{'identical on every rank' if same else 'DIFFER'}", flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
