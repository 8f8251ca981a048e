"""Every configuration a 5-trial sweep would run on a mirror dataset builds and trains on that dataset.

The tiny-graph check (test_methods_fit.py) cannot see what depends on a real
graph's size and shape: memory estimates, feature and class counts, binary
against multiclass heads, hop and head counts against hidden widths. Here the
exact sequences ``orchestrator run --budget 5`` draws (split 0, both regimes)
are fitted for two epochs on each mirror dataset, in-process through the same
``fit``/``predict`` a service calls. A config that raises, or predicts
anything but finite probabilities, is an invalid draw of the sampler. A
``ResourceError`` is not: it is the method refusing, before building, what
this machine's free memory cannot hold (the sweep records it as a failed
trial with the estimate); those refusals are printed, since they depend on the
machine the test runs on.
Full-length sweeps through the images are the slow, out-of-test evidence.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from contract.wire import GraphBundle
from methods.sdk import ResourceError
from orchestrator.data.registry import load_dataset
from orchestrator.data.splits import Split, graph_split
from orchestrator.run_trial import hidden_label_bundle
from orchestrator.sampling import config_sequence, sequence_key
from tests.methods.helpers import cpu_context
from tests.methods.test_methods_catalog import all_methods

# The mirror's ten node-classification datasets, smallest first.
MIRROR_DATASETS = [
    "texas",
    "cornell",
    "wisconsin",
    "chameleon-filtered",
    "squirrel-filtered",
    "cora",
    "citeseer",
    "actor",
    "minesweeper",
    "tolokers",
]
REGIMES = ["10/10/80", "50/25/25"]
BUDGET = 5
SPLIT = 0
EPOCHS = 2  # enough to run forward, loss, backward and an optimizer step on the real graph


@lru_cache(maxsize=1)  # tests run dataset by dataset; keep one graph in memory
def _bundles(dataset: str) -> list[tuple[str, Split, GraphBundle, int]]:
    """One hidden-label bundle per regime, as the sweep builds them; loaded once per dataset."""
    graph = load_dataset(dataset)
    out = []
    for regime in REGIMES:
        split = graph_split(graph, regime, SPLIT)
        out.append((regime, split, hidden_label_bundle(graph, split), graph.num_classes))
    return out


@pytest.mark.sweep_configs
@pytest.mark.timeout(3600)  # a cell took up to 423 s on an idle core; the suite default is 600 s
@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
@pytest.mark.parametrize("dataset", MIRROR_DATASETS)
def test_sweep_configs_train_on_mirror_dataset(mirror, dataset, method) -> None:
    failures = []
    for regime, split, bundle, classes in _bundles(dataset):
        key = sequence_key(method.name, dataset, regime, SPLIT)
        configs = config_sequence(method.default_config, method.search_space, key, BUDGET)
        assert len(configs) == BUDGET
        for index, config in enumerate(configs):
            try:
                resolved = method.resolve_config({**config, "max_epochs": EPOCHS})
                ctx = cpu_context(seed=SPLIT)
                probs = method().predict(method().fit(bundle, split.train, split.val, resolved, ctx), bundle)
                assert probs.shape == (bundle.num_nodes, classes), f"shape {probs.shape}"
                assert np.isfinite(probs).all(), "non-finite probabilities"
                np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-4)
            except ResourceError as exc:
                print(f"\nREFUSED {dataset} {method.name} {regime} trial {index}: {exc}")
            except Exception as exc:  # collect every bad draw of the cell, not only the first
                failures.append(f"{regime} trial {index} {config}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
