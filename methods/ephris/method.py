"""Method "ephris": a logistic regression on node features — replace the model with yours.

The SDK's ``TorchNodeClassifier`` does the shared work (seeding, binary or
multiclass loss, early stopping on validation loss with best-epoch restore,
the deadline check every epoch, time and memory probes); a method states its
metadata, its default configuration and its search space (the SDK's
``FloatParam`` / ``IntParam`` / ``ChoiceParam``, as every built-in method does;
the service publishes both through Describe) and builds its network.

Rules of the contract (checked by `orchestrator validate`): labels of nodes
outside train ∪ val arrive as -1 and must not be used as labels; predict
returns an N x C matrix whose rows sum to one; a fit stops when its deadline
passes (``ctx.check()`` — the SDK calls it every epoch).
"""

from __future__ import annotations

from torch import nn

from methods.sdk import Capabilities, ChoiceParam, FloatParam, TorchNodeClassifier


class LogisticRegression(nn.Module):
    """One linear layer on the node features; ``forward(x, edge_index)`` returns logits."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim)

    def forward(self, x, edge_index):  # edge_index unused: a feature-only baseline
        return self.linear(x)


class EphrisMethod(TorchNodeClassifier):
    name = "ephris"
    version = "2026-12-01"  # the dated, frozen definition: change it when the method changes
    kind = "supervised"  # or "gfm" for a pretrained graph foundation model
    description = "Logistic regression on node features (scaffold; replace with your method)."
    capabilities = Capabilities(uses_gpu=True, supports_binary=True, supports_multiclass=True)
    # Every key the fit reads; the orchestrator always runs this configuration first (trial 0).
    default_config = {"lr": 0.05, "weight_decay": 5e-4, "max_epochs": 300, "patience": 30, "optimizer": "adam"}
    # The tuned keys (also IntParam(name, low, high, log=False)); the orchestrator samples further
    # configurations from them, and keys not listed keep their default.
    search_space = (
        FloatParam("lr", 1e-3, 0.2, log=True),
        FloatParam("weight_decay", 1e-6, 1e-2, log=True),
        ChoiceParam("optimizer", ("adam", "adamw")),
    )

    def build_model(self, config, in_dim: int, out_dim: int) -> nn.Module:
        return LogisticRegression(in_dim, out_dim)
