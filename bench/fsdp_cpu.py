"""What an accelerate FSDP launch does on a machine without GPUs (README, "Several GPUs"; bench/RESULTS.md).

    OMP_NUM_THREADS=1 accelerate launch --num_processes 2 --use_fsdp --fsdp_version 2 bench/fsdp_cpu.py
    OMP_NUM_THREADS=1 torchrun --nproc_per_node 2 bench/fsdp_cpu.py --torch

The first prints accelerate's distributed type in each process (accelerate 1.15: ``NO``, every process rank 0: no
sharding happens); the second shards a two-layer model with torch's own ``fully_shard`` over gloo and takes one
AdamW step (it runs on CPU processes), printing each rank's loss.
"""

import sys

import torch


def main() -> None:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    if "--torch" in sys.argv:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        dist.init_process_group("gloo")
        for layer in m:
            fully_shard(layer)
        fully_shard(m)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        loss = m(x).pow(2).mean()
        loss.backward()
        opt.step()
        print(f"torch fully_shard: rank {dist.get_rank()} of {dist.get_world_size()}, loss {loss.item():.6f}")
        dist.destroy_process_group()
        return
    from accelerate import Accelerator

    acc = Accelerator()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    m, opt = acc.prepare(m, opt)
    print(f"accelerate: distributed type {acc.distributed_type.name}, process {acc.process_index} of "
          f"{acc.num_processes}, model {type(m).__name__}")


if __name__ == "__main__":
    main()
