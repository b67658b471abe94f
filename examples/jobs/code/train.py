"""A stand-in training loop for the examples: prints progress and where it runs."""

import os
import sys
import time

epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 3
print(f"GPUs: {os.environ.get('CUDA_VISIBLE_DEVICES', 'none')}", flush=True)
if "ROTA_WORLD_SIZE" in os.environ:  # a replica of a gang: what torch.distributed would use
    print(f"replica {os.environ['ROTA_REPLICA_RANK']} of {os.environ['ROTA_WORLD_SIZE']}, "
          f"rank 0 at {os.environ['ROTA_MASTER_ADDR']}:{os.environ['ROTA_MASTER_PORT']}",
          flush=True)
for epoch in range(epochs):
    time.sleep(0.1)
    print(f"epoch {epoch + 1}/{epochs}", flush=True)
