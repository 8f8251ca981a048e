"""Scoring and record-write cost, each against its reference, measured side by side in one run.

- scoring: ``orchestrator.metrics.evaluate`` (numpy) against the scikit-learn calls it replaced (the
  reference ``tests/orchestrator/test_metrics.py`` checks it against) and against a plain numpy
  reference (the same multiclass numbers in plain numpy, written the obvious way), per call, at 300 x 3 and
  20,000 x 10 (multiclass, full test metrics) and 20,000 x 2 (binary, with AUROC);
- store writes: ``Store.write`` of one trial record at ``synchronous=NORMAL`` (the store's setting)
  against the same at ``synchronous=FULL`` (the previous setting), on a fresh store each.

CPU time (``time.process_time``), the candidates interleaved round by round, the median of the rounds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from orchestrator.metrics import EPS, evaluate
from tests.orchestrator.test_metrics import reference as sklearn_evaluate  # the metrics as scikit-learn computes them

ROUNDS = 7


def numpy_reference(probs: np.ndarray, labels: np.ndarray, task_type: str, num_classes: int) -> dict[str, float]:
    """The same multiclass numbers (cross-entropy, accuracy, macro-F1) in plain numpy, written the obvious way."""
    clipped = np.clip(probs.astype(np.float64), EPS, 1.0)
    clipped /= clipped.sum(axis=1, keepdims=True)
    predicted = probs.argmax(axis=1)
    ce = -np.log(clipped[np.arange(labels.shape[0]), labels]).mean()
    t, p = np.bincount(labels, minlength=num_classes), np.bincount(predicted, minlength=num_classes)
    hits = np.bincount(labels[labels == predicted], minlength=num_classes)
    seen = (t + p) > 0
    return {
        "cross_entropy": float(ce),
        "accuracy": float((labels == predicted).mean()),
        "macro_f1": float((2 * hits[seen] / (t[seen] + p[seen])).mean()),
    }


def per_call(fn: Callable[[], object], seconds: float = 0.2) -> float:
    """CPU seconds per call of ``fn``, over as many calls as fit in about ``seconds`` of CPU."""
    fn()
    calls, start = 0, time.process_time()
    while True:
        fn()
        calls += 1
        spent = time.process_time() - start
        if spent >= seconds:
            return spent / calls


def interleaved(candidates: dict[str, Callable[[], object]]) -> dict[str, float]:
    rounds: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(ROUNDS):
        for name, fn in candidates.items():
            rounds[name].append(per_call(fn))
    return {name: statistics.median(values) for name, values in rounds.items()}


def inputs(n: int, c: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, c))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32), rng.integers(0, c, size=n)


def bench_scoring() -> None:
    print("scoring, CPU ms per call (median of interleaved rounds):")
    for n, c, task in ((300, 3, "multiclass"), (20_000, 10, "multiclass"), (20_000, 2, "binary")):
        probs, labels = inputs(n, c)
        candidates: dict[str, Callable[[], object]] = {
            "ours": partial(evaluate, probs, labels, task, c),
            "sklearn": partial(sklearn_evaluate, probs, labels, task, c),
        }
        if task == "multiclass":
            candidates["numpy_ref"] = partial(numpy_reference, probs, labels, task, c)
        t = interleaved(candidates)
        line = (
            f"  {task:10s} {n:6d} x {c:2d}: ours {t['ours'] * 1e3:7.3f}  sklearn {t['sklearn'] * 1e3:7.3f}  "
            f"sklearn/ours {t['sklearn'] / t['ours']:6.1f}x"
        )
        if "numpy_ref" in t:
            line += f"  numpy ref {t['numpy_ref'] * 1e3:7.3f}  ours/numpy ref {t['ours'] / t['numpy_ref']:5.2f}x"
        print(line, flush=True)


def bench_store() -> None:
    import sqlite3

    from orchestrator.store import Store
    from tests.orchestrator.conftest import trial_record

    writes = 200

    def write_cost(tmp: Path, synchronous: str, tag: int) -> float:
        with Store(tmp / f"{synchronous}-{tag}.sqlite") as store:
            db: sqlite3.Connection = store._db
            db.execute(f"PRAGMA synchronous={synchronous}")
            start = time.perf_counter()
            for i in range(writes):
                store.write(trial_record(f"k{i}"))
            return (time.perf_counter() - start) / writes

    wall: dict[str, list[float]] = {"NORMAL": [], "FULL": []}
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=Path.cwd()) as tmp:
        for tag in range(ROUNDS):
            for synchronous in wall:
                wall[synchronous].append(write_cost(Path(tmp), synchronous, tag))
    normal, full = (statistics.median(wall[s]) for s in ("NORMAL", "FULL"))
    print(
        f"store write, wall ms per trial record (own transaction, WAL; {writes} writes x {ROUNDS} rounds, median): "
        f"synchronous=NORMAL {normal * 1e3:.3f}  FULL {full * 1e3:.3f}  FULL/NORMAL {full / normal:.1f}x",
        flush=True,
    )


def main() -> None:
    bench_scoring()
    bench_store()


if __name__ == "__main__":
    main()
