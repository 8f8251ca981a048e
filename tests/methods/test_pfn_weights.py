"""The in-context GFMs' weights catalog, unverified entries, and the real-weights run (marked);
each family's official structure is tested in its own folder."""

from __future__ import annotations

import numpy as np
import pytest

from contract.weights import WeightsError, load_weights_catalog
from methods.sdk.weights import resolve


def test_catalog_entries_and_unverified_refusal(tmp_path):
    catalog = load_weights_catalog()
    ids = {"limix-16m", "graphpfn-1.3-adapters", "nodepfn-epoch30", "tabpfn-v2-classifier", "g2tfm-pearl-random"}
    assert ids <= set(catalog)
    entry = catalog["nodepfn-epoch30"]
    assert entry.url.startswith("https://") and entry.sha256 == "unverified"
    path = tmp_path / entry.relative_path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not the upstream file")
    with pytest.raises(WeightsError, match="unverified"):
        resolve(entry, tmp_path)
    resolved = resolve(entry, tmp_path, allow_unverified=True)
    assert resolved.official is False and len(resolved.sha256) == 64


def _weights_present(*ids: str) -> bool:
    from contract.weights import weights_dir

    catalog = load_weights_catalog()
    return all((weights_dir() / catalog[i].relative_path).is_file() for i in ids)


@pytest.mark.weights
@pytest.mark.parametrize(
    "method, ids",
    [
        ("graphpfn", ("limix-16m", "graphpfn-1.3-adapters")),
        ("nodepfn", ("nodepfn-epoch30",)),
        ("g2tfm", ("tabpfn-v2-classifier", "g2tfm-pearl-random")),
    ],
)
def test_real_weights_on_texas(method, ids, monkeypatch):
    """With the upstream files in NODEGROUND_WEIGHTS: loads them as they are and classifies texas well above chance."""
    if not _weights_present(*ids):
        pytest.skip(
            f"{method}: official weights {', '.join(ids)} not in NODEGROUND_WEIGHTS (fetch them; not reachable offline)"
        )
    monkeypatch.setenv("NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS", "1")

    from contract.families import load_families
    from contract.wire import make_bundle
    from methods.families import method_classes
    from methods.sdk.method import FitContext, pick_device
    from orchestrator.data.registry import load_dataset
    from orchestrator.data.splits import graph_split

    cls = method_classes(load_families()[method])[0]
    graph = load_dataset("texas")
    split = graph_split(graph, "public", 0)
    labels = np.full(graph.num_nodes, -1)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    bundle = make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)
    ctx = FitContext(seed=0, device=pick_device(True))
    m = cls()
    probs = m.predict(m.fit(bundle, split.train, split.val, cls.resolve_config({}), ctx), bundle)
    assert ctx.info["weights_id"] != "random-init"
    acc = float((probs[split.test].argmax(1) == graph.y[split.test]).mean())
    assert acc > 0.6, f"{method} test accuracy on texas {acc:.3f}"
