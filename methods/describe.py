"""Write each family's ``description.json``: what its Describe answers, as committed data (``contract.descriptions``).

``python -m methods.describe`` (``make describe``) writes every family's file; ``python -m methods.describe gnn``
one family's; ``--check`` writes nothing and exits 1 naming every family whose file is missing or stale.
It imports each family's code (its service's dependencies must be installed) and calls ``describe_method``,
the function the service's Describe calls, so the file is exactly what a service built from this checkout says.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contract.descriptions import description_path, description_text
from contract.families import ROOT, Family, load_families
from methods.families import method_classes
from methods.sdk.service import describe_method


def generated(family: Family) -> str:
    """The description file's text for ``family``, from its code."""
    return description_text(family.name, [describe_method(cls, family.name) for cls in method_classes(family)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m methods.describe", description=__doc__)
    parser.add_argument("families", nargs="*", help="Families to describe (default: every family under methods/).")
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 if a file is missing or stale.")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    families = load_families(args.root)
    unknown = [name for name in args.families if name not in families]
    if unknown:
        print(f"error: unknown family {unknown[0]!r}; families: {', '.join(families)}", file=sys.stderr)
        return 2
    stale = []
    for name in args.families or list(families):
        path, text = description_path(name, args.root), generated(families[name])
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(
            f"error: stale or missing description for {', '.join(stale)}; regenerate with `make describe`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
