"""The formatter decides the layout of product code, except where alignment carries meaning: a table whose rows
group what belongs together. Each such ``# fmt: skip`` says so in a comment above it (``# A table: ...``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("orchestrator", "contract", "methods", "nodeground")
MAX_SKIPS = 15
REACH = 15  # lines above a skip where its reason may stand (the table's first line is below it)


def skips() -> list[tuple[Path, int, list[str]]]:
    found = []
    for root in PRODUCT:
        for path in sorted((REPO / root).rglob("*.py")):
            lines = path.read_text().splitlines()
            found += [(path, n, lines) for n, line in enumerate(lines) if line.rstrip().endswith("# fmt: skip")]
    return found


def test_fmt_skip_is_rare_in_product_code():
    assert len(skips()) <= MAX_SKIPS


def test_each_fmt_skip_says_why():
    unexplained = [
        f"{path.relative_to(REPO)}:{n + 1}"
        for path, n, lines in skips()
        if not any(line.strip().startswith("# A table:") for line in lines[max(0, n - REACH) : n])
    ]
    assert not unexplained, "a '# fmt: skip' needs a '# A table: ...' comment above it:\n" + "\n".join(unexplained)
