"""What the gnn family's cost prior weighs, measured here: a gather-scatter element and a dropout element, each in
dense multiply-adds (the prior's unit), on one torch thread.

The prior (methods/gnn/manifest.toml) declares 8 per gather-scatter element and 16 per dropout element. Only their
ratios matter before records weigh the terms, so the line to read is ``dropout / gather-scatter`` (declared 2).
The dropout is the SDK's (``methods.sdk.dropout``: what the methods run); torch's own is printed beside it. Each
figure is the best of several runs, so a loaded machine slows it less.
"""

from __future__ import annotations

import time
from collections.abc import Callable

NODES, ARCS, WIDTH, FEATURES = 10_000, 100_000, 64, 2_048
DECLARED = {"gather-scatter": 8.0, "dropout": 16.0}


def best_seconds(step: Callable[[], object], repeats: int = 15) -> float:
    step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    import torch

    from methods.sdk.dropout import dropout as sdk_dropout

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(NODES, FEATURES, generator=generator)
    weight = torch.randn(FEATURES, WIDTH, generator=generator)
    h = torch.randn(NODES, WIDTH, generator=generator)
    source = torch.randint(0, NODES, (ARCS,), generator=generator)
    target = torch.randint(0, NODES, (ARCS,), generator=generator)

    def message_pass() -> torch.Tensor:
        return torch.zeros(NODES, WIDTH).index_add_(0, target, h.index_select(0, source))

    mac = best_seconds(lambda: x @ weight) / (NODES * FEATURES * WIDTH)
    gather = best_seconds(message_pass) / (ARCS * WIDTH)
    dropout = best_seconds(lambda: sdk_dropout(x, 0.5, True)) / x.numel()
    torch_dropout = best_seconds(lambda: torch.nn.functional.dropout(x, 0.5, True)) / x.numel()
    print(f"torch {torch.__version__}, 1 thread: a dense multiply-add {mac * 1e9:.4f} ns")
    for name, seconds in (("gather-scatter", gather), ("dropout", dropout)):
        ratio = seconds / mac
        print(
            f"{name:>15}: {seconds * 1e9:6.2f} ns an element = {ratio:5.0f} multiply-adds (declared {DECLARED[name]:g})"
        )
    print(f"   torch's dropout: {torch_dropout * 1e9:6.2f} ns an element ({torch_dropout / dropout:.1f}x the SDK's)")
    declared = DECLARED["dropout"] / DECLARED["gather-scatter"]
    print(f"dropout / gather-scatter: {dropout / gather:.1f} (declared {declared:g})")


if __name__ == "__main__":
    main()
