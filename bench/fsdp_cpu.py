"""What an accelerate FSDP launch does on a machine without GPUs (README, "Several GPUs"; bench/RESULTS.md).

    OMP_NUM_THREADS=1 accelerate launch --num_processes 2 --use_fsdp --fsdp_version 2 bench/fsdp_cpu.py
    OMP_NUM_THREADS=1 torchrun --nproc_per_node 2 bench/fsdp_cpu.py --torch

The first prints accelerate's distributed type in each process (accelerate 1.15: ``NO``, every process rank 0: no
sharding happens); the second shards a two-layer model with torch's own ``fully_shard`` over gloo and takes one
AdamW step (it runs on CPU processes), printing each rank's loss. The third runs dukb itself with accelerate's
state set to what an FSDP2 launch gives on GPUs (``FSDP``, ``fsdp_version=2``), so accelerate's own ``prepare``
shards the model with ``fully_shard`` on CPU processes:

    OMP_NUM_THREADS=1 PYTHONPATH=. torchrun --nproc_per_node 2 bench/fsdp_cpu.py --dukb finetune --kb demo \
        --epochs 100 --device cpu --seed 0 -o OUT

``DUKB_FSDP_PLUGIN`` (JSON) passes keyword arguments to accelerate's ``FullyShardedDataParallelPlugin``, e.g.
``{"auto_wrap_policy": "transformer_based_wrap", "activation_checkpointing": true,
"cpu_ram_efficient_loading": true}`` (without it accelerate puts the whole model in the root unit).
"""

import sys

import torch


def dukb_under_fsdp2(argv: list[str]) -> int:
    """Run ``dukb ARGV`` with every accelerator created in FSDP2 state (see the module docstring); the plugin's
    options come from ``$DUKB_FSDP_PLUGIN``."""
    import json
    import os

    import accelerate
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    class FSDPOnCPU(accelerate.Accelerator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.state.distributed_type = DistributedType.FSDP
            options = json.loads(os.environ.get("DUKB_FSDP_PLUGIN") or "{}")
            self.state.fsdp_plugin = FullyShardedDataParallelPlugin(fsdp_version=2, **options)

    accelerate.Accelerator = FSDPOnCPU
    from dukb.cli.main import main as dukb_main

    return dukb_main(argv)


def main() -> None:
    if "--dukb" in sys.argv:
        sys.exit(dukb_under_fsdp2(sys.argv[sys.argv.index("--dukb") + 1 :]))
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
    print(
        f"accelerate: distributed type {acc.distributed_type.name}, process {acc.process_index} of "
        f"{acc.num_processes}, model {type(m).__name__}"
    )


if __name__ == "__main__":
    main()
