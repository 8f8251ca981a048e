"""Run every benchmark module's ``main()`` in turn: ``python -m tests.bench [name ...]``."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(selected: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_"))
    for name in names:
        if selected and name.removeprefix("bench_") not in selected and name not in selected:
            continue
        print(f"\n=== {name} ===", flush=True)
        sys.argv = [f"tests.bench.{name}"]  # each benchmark parses its own (default) options
        importlib.import_module(f"tests.bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
