"""Epoch time of our GCN, GAT and GCNII against a minimal plain-PyG loop of the same model.

Same 100k-node synthetic graph, same sizes, same work per epoch (one training
step and one evaluation pass for the validation loss, which early stopping
needs). Our epoch time is read from the SDK's per-epoch check (``FitContext``
calls ``is_cancelled`` once per epoch), so model building and tensor setup
are excluded on both sides. Medians over several epochs, measured alternately
to even out machine noise. On a CPU the clock is the process's CPU time (the
runs use one torch thread unless NODEGROUND_THREADS says otherwise), so that
other work on a shared machine does not land in either side's numbers; on a
GPU it is wall time after synchronizing. Prints one line per model and the ratio; the
target is ours / plain <= 1.10.

Run: ``python -m tests.bench.bench_methods`` (or ``python tests/bench/bench_methods.py``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT,):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch_geometric.nn import GATConv, GCN2Conv, GCNConv  # noqa: E402

from contract.wire import make_bundle  # noqa: E402
from methods.gnn import GAT, GCN, GCNII  # noqa: E402
from methods.sdk.method import FitContext, pick_device  # noqa: E402
from orchestrator.data.synthetic import sbm_graph  # noqa: E402

NUM_NODES = int(os.environ.get("BENCH_NODES", 100_000))
EPOCHS = int(os.environ.get("BENCH_EPOCHS", 4))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 2))
TARGET = 1.10

# Sizes per model (GCNII at 16 layers keeps a CPU run short; both sides use the same).
CONFIGS = {
    "gcn": (GCN, {"hidden": 64, "num_layers": 2, "dropout": 0.5}),
    "gat": (GAT, {"hidden": 64, "heads": 8, "out_heads": 1, "dropout": 0.6, "input_dropout": 0.6, "attn_dropout": 0.6}),
    "gcnii": (GCNII, {"hidden": 64, "num_layers": 16, "dropout": 0.6}),
}


class PlainGCN(nn.Module):
    def __init__(self, f: int, h: int, c: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = (
            GCNConv(f, h, cached=True, add_self_loops=False),
            GCNConv(h, c, cached=True, add_self_loops=False),
        )

    def forward(self, x, ei):
        x = F.dropout(F.relu(self.conv1(x, ei)), 0.5, self.training)
        return self.conv2(x, ei)


class PlainGAT(nn.Module):
    def __init__(self, f: int, h: int, c: int) -> None:
        super().__init__()
        self.conv1 = GATConv(f, h // 8, heads=8, dropout=0.6, add_self_loops=False)
        self.conv2 = GATConv(h, c, heads=1, concat=False, dropout=0.6, add_self_loops=False)

    def forward(self, x, ei):
        x = F.dropout(x, 0.6, self.training)
        x = F.dropout(F.elu(self.conv1(x, ei)), 0.6, self.training)
        return self.conv2(x, ei)


class PlainGCNII(nn.Module):
    def __init__(self, f: int, h: int, c: int, layers: int = 16) -> None:
        super().__init__()
        self.lin_in, self.lin_out = nn.Linear(f, h), nn.Linear(h, c)
        self.convs = nn.ModuleList(
            GCN2Conv(h, 0.1, 0.5, layer=i + 1, shared_weights=True, cached=True, add_self_loops=False)
            for i in range(layers)
        )

    def forward(self, x, ei):
        x = x0 = F.relu(self.lin_in(F.dropout(x, 0.6, self.training)))
        for conv in self.convs:
            x = F.relu(conv(F.dropout(x, 0.6, self.training), x0, ei))
        return self.lin_out(F.dropout(x, 0.6, self.training))


PLAIN = {"gcn": PlainGCN, "gat": PlainGAT, "gcnii": PlainGCNII}
CLOCK = time.perf_counter  # set in main(): CPU time on a CPU


def _clock() -> float:
    return CLOCK()


def plain_model(name: str, in_dim: int, classes: int, device="cpu") -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The plain PyG model and its optimiser, seeded: what the service's fits are compared with."""
    torch.manual_seed(0)
    model = PLAIN[name](in_dim, 64, classes).to(device)
    return model, torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def plain_epoch(model: torch.nn.Module, opt: torch.optim.Optimizer, x, ei, y, train, val) -> None:
    """One epoch of the plain loop: one training step and one validation pass."""
    model.train()
    opt.zero_grad()
    F.cross_entropy(model(x, ei)[train], y[train]).backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        float(F.cross_entropy(model(x, ei)[val], y[val]))


def plain_epochs(name: str, x, ei, y, train, val, classes: int, device) -> list[float]:
    model, opt = plain_model(name, x.shape[1], classes, device)
    times = []
    for _ in range(EPOCHS + 1):
        start = _clock()
        plain_epoch(model, opt, x, ei, y, train, val)
        _sync(device)
        times.append(_clock() - start)
    return times[1:]  # the first epoch builds caches


def our_epochs(name: str, bundle, train, val, device) -> list[float]:
    method, overrides = CONFIGS[name]
    stamps: list[float] = []

    def tick() -> bool:
        _sync(device)
        stamps.append(_clock())
        return False

    config = method.resolve_config({**overrides, "max_epochs": EPOCHS + 2, "patience": 300})
    method().fit(bundle, train, val, config, FitContext(seed=0, device=device, is_cancelled=tick))
    return list(np.diff(stamps)[1:])  # epoch k = tick(k+1) - tick(k); the first builds caches


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    global CLOCK
    device = pick_device(True)
    if device.type == "cpu":
        torch.set_num_threads(int(os.environ.get("NODEGROUND_THREADS", 1)))
        CLOCK = time.process_time
    g = sbm_graph("bench", num_nodes=NUM_NODES, num_classes=8, num_features=128, avg_degree=10, homophily=0.7, seed=0)
    rng = np.random.default_rng(0)
    perm = rng.permutation(NUM_NODES)
    train, val = np.sort(perm[: NUM_NODES // 10]), np.sort(perm[NUM_NODES // 10 : NUM_NODES // 5])
    visible = np.full(NUM_NODES, -1)
    visible[train], visible[val] = g.y[train], g.y[val]
    bundle = make_bundle(g.x, g.edge_index, visible, g.num_classes)
    x = torch.from_numpy(bundle.features).to(device)
    ei = torch.from_numpy(bundle.edge_index).to(device)
    y = torch.from_numpy(g.y).to(device)
    tr, va = torch.from_numpy(train).to(device), torch.from_numpy(val).to(device)
    print(
        f"graph: {NUM_NODES} nodes, {bundle.edge_index.shape[1]} edges (with self-loops), 128 features, 8 classes; "
        f"device {device}, {torch.get_num_threads()} threads, {'CPU' if CLOCK is time.process_time else 'wall'} time; "
        f"median of {EPOCHS} epochs x {ROUNDS} rounds"
    )
    worst = 0.0
    for name in CONFIGS:
        ours, plain = [], []
        for _ in range(ROUNDS):  # alternate, so that a noisy moment hits both sides
            plain += plain_epochs(name, x, ei, y, tr, va, g.num_classes, device)
            ours += our_epochs(name, bundle, train, val, device)
        o, p = statistics.median(ours), statistics.median(plain)
        worst = max(worst, o / p)
        print(
            f"{name:6s} ours {o * 1000:8.1f} ms/epoch   plain PyG {p * 1000:8.1f} ms/epoch   ratio {o / p:5.2f}x",
            flush=True,
        )
    print(f"worst ratio {worst:.2f}x (target <= {TARGET:.2f}x): {'OK' if worst <= TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
