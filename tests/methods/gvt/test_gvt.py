"""RGVT on tiny graphs: a frozen encoder, heads trained, depth chosen on validation, chunking-invariant
representations."""

from __future__ import annotations

import numpy as np
import torch

from methods.gvt import RGVT
from methods.gvt.model import GraphViewTransformation, recurrent_representations
from tests.methods.helpers import QUICK, assert_frozen, assert_probs, cpu_context, frozen_checkpoint


def test_gvt_selects_depth_on_validation(weights, graph):
    bundle, train, val = graph
    m, context = RGVT(), cpu_context()
    state = m.fit(bundle, train, val, m.resolve_config({"max_depth": 3, **QUICK}), context)
    assert_probs(m.predict(state, bundle))
    assert_frozen(state.encoder, frozen_checkpoint(weights, "gvt-seed42"))
    losses = [context.info[f"val_loss_depth{d}"] for d in (1, 2, 3)]
    assert context.info["selection"] == "val_loss" and context.info["depth"] == 1 + int(np.argmin(losses))
    assert context.info["best_val_loss"] == min(losses)
    assert context.info["weights_id"] == "gvt-seed42" and context.info["weights_official"] is True
    # a second fit on the same graph reuses the representations
    again = cpu_context()
    m.fit(bundle, train, val, m.resolve_config({"depth": 2, "head": "linear", "checkpoint_seed": 42, **QUICK}), again)
    assert again.info["embeddings_cached"] is True and again.info["depth"] == 2


def test_gvt_other_seed_checkpoint(weights, graph):
    bundle, train, val = graph
    m, context = RGVT(), cpu_context()
    state = m.fit(bundle, train, val, m.resolve_config({"depth": 1, "checkpoint_seed": 2026, **QUICK}), context)
    assert_frozen(state.encoder, frozen_checkpoint(weights, "gvt-seed2026"))
    assert context.info["weights_id"] == "gvt-seed2026"


def test_gvt_column_chunks_do_not_change_representations(weights, graph):
    bundle, _, _ = graph
    gvt = GraphViewTransformation.from_state_dict(frozen_checkpoint(weights, "gvt-seed0"))
    x, e = torch.from_numpy(bundle.features), torch.from_numpy(bundle.edge_index)
    whole = recurrent_representations(gvt, x, e, 2)
    chunked = recurrent_representations(gvt, x, e, 2, chunk_elements=48 * 5)  # one column at a time
    for a, b in zip(whole, chunked, strict=True):
        torch.testing.assert_close(a, b)
