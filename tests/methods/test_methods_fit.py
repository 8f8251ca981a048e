"""Every method fits and predicts, for every configuration its sampler can produce."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.sampling import config_sequence, sequence_key
from tests.methods.helpers import cpu_context, homophilous_bundle, tiny_bundle
from tests.methods.test_methods_catalog import all_methods

SAMPLES = 10  # configs per method and task type beyond the default


def _check_probabilities(probs: np.ndarray, n: int, classes: int) -> None:
    assert probs.shape == (n, classes)
    assert probs.dtype == np.float32
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-4)


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
@pytest.mark.parametrize("classes", [3, 2], ids=["multiclass", "binary"])
def test_every_sampled_config_fits(method, classes) -> None:
    bundle, train, val = tiny_bundle(classes=classes, seed=classes)
    key = sequence_key(method.name, "tiny", "10/10/80", classes)
    configs = config_sequence(method.default_config, method.search_space, key, SAMPLES + 1)
    assert len(configs) == SAMPLES + 1
    for config in configs:
        resolved = method.resolve_config({**config, "max_epochs": 2})  # what the service does
        ctx = cpu_context()
        state = method().fit(bundle, train, val, resolved, ctx)
        _check_probabilities(method().predict(state, bundle), bundle.num_nodes, classes)
        assert ctx.info["epochs"] <= 2


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
def test_fit_is_deterministic_per_seed_and_learns(method) -> None:
    bundle, train, val, y = homophilous_bundle()
    small = {"hidden": 64, "num_layers": 4, "local_layers": 2, "local_epochs": 10}
    config = method.resolve_config(
        {"max_epochs": 40, "patience": 40, "lr": 0.01, **{k: v for k, v in small.items() if k in method.default_config}}
    )
    runs = [method().predict(method().fit(bundle, train, val, config, cpu_context(seed=3)), bundle) for _ in range(2)]
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-5)
    test = np.setdiff1d(np.arange(bundle.num_nodes), np.concatenate([train, val]))
    assert (runs[0].argmax(1)[test] == y[test]).mean() > 0.6, f"{method.name} did not learn an easy graph"
