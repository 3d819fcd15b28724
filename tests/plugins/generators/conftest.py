"""Small Adult samples for the baseline generators' tests (one intra-op thread: tiny models)."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def adult_rows(adult_split):
    """600 training rows of Adult: enough for both classes and most categories, fast to fit."""
    return adult_split.train.sample(600, random_state=0).reset_index(drop=True)
