"""The smallest real check that a gang rendezvouses: every process sums the ranks of all with
torch.distributed (NCCL on GPUs, gloo without them) and prints what it got.

    rota run --replicas 2 --gpus 1 --wait -- python ddp.py                 # rota's torchrun variables
    rota run --replicas 2 --gpus 1 --wait -- sh -c 'torchrun --nnodes "$WORLD_SIZE" \
        --node_rank "$NODE_RANK" --nproc_per_node 1 --master_addr "$MASTER_ADDR" \
        --master_port "$MASTER_PORT" ddp.py'                               # or torchrun's own start

Needs PyTorch where the job runs (your virtual environment: rota run sends it).
"""

import os

import torch
import torch.distributed as dist

backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)  # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
if backend == "nccl":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    value = value.cuda()
dist.all_reduce(value)
print(f"rank {rank} of {world} ({backend}, GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', 'none')}):"
      f" sum of ranks {value.item():g}, expected {world * (world - 1) // 2}", flush=True)
dist.destroy_process_group()
