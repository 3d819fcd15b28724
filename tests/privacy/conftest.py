"""Tiny models: one intra-op thread is faster than two, and immune to other jobs on the machine."""

import torch

torch.set_num_threads(1)
