import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)
