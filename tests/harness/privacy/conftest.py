"""Tiny models: one intra-op thread is faster than two, and immune to other jobs on the machine."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
