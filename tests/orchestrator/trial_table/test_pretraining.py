"""The pretraining exclusion rule: a checkpoint is never planned on its own pretraining graph."""

from __future__ import annotations

from contract.space import ChoiceParam
from orchestrator.trial_table import pretraining as pr


def test_the_sweep_plans_no_checkpoint_on_its_own_pretraining_graph():
    from orchestrator.sampling import config_sequence, sequence_key

    configs = config_sequence(
        {"checkpoint": "arxiv", "weights_file": ""},
        (ChoiceParam("checkpoint", ("arxiv", "cora", "product", "wisconsin")),),
        sequence_key("graphany", "wisconsin", "10/10/80", 0),
        4,
    )
    kept = [c["checkpoint"] for c in configs if not pr.excluded_by_pretraining("graphany", c, "wisconsin")]
    assert "wisconsin" in [c["checkpoint"] for c in configs] and "wisconsin" not in kept and "arxiv" in kept
