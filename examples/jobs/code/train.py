"""A stand-in training loop for the examples: prints progress and where it runs."""

import os
import sys
import time

epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 3
print(f"GPUs: {os.environ.get('CUDA_VISIBLE_DEVICES', 'none')}", flush=True)
for epoch in range(epochs):
    time.sleep(0.1)
    print(f"epoch {epoch + 1}/{epochs}", flush=True)
