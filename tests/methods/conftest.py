"""Fixtures for the method tests: tiny graphs (tens of nodes: every fit takes milliseconds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contract.wire import GraphBundle
from tests.methods.helpers import tiny_bundle

torch.set_num_threads(1)  # tiny graphs: threads only add contention


@pytest.fixture
def multiclass() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    return tiny_bundle()


@pytest.fixture
def binary() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    return tiny_bundle(classes=2, seed=1)
