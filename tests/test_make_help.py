"""`make help` lists every make target with its one-line purpose and expected duration, and needs no venv.

The lines come from the makefiles' own `## purpose (duration)` comments; the targets to compare them with come from
make's database (`make -pRrq`), so a target added to any makefile without its line fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^  (\S+)\s+(\S.*)$")
DURATION = re.compile(r"\([^()]+\)$")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # not a sub-make
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True, text=True)


def _help(venv: Path) -> dict[str, str]:
    result = _make("help", f"VENV={venv}")
    assert result.returncode == 0, result.stderr
    return dict(m.groups() for m in map(LINE.match, result.stdout.splitlines()) if m)


def _targets() -> set[str]:
    """Every rule make knows that is not a file path (the venv stamp, a rootfs tarball), patterns shown as NAME."""
    database = _make("-pRrq", "help").stdout  # -q: nothing runs
    names, not_a_target = set(), False
    for line in database.splitlines():
        match = re.match(r"^([^#\s=:][^=:]*):(?!=)", line)
        if match and not not_a_target and "/" not in match[1] and not match[1].startswith("."):
            names.add(match[1].replace("%", "NAME"))
        not_a_target = line.startswith("# Not a target")
    return names


def test_every_target_has_a_purpose_and_a_duration(tmp_path):
    listed, targets = _help(tmp_path / "no-venv"), _targets()
    assert not targets - set(listed), f"no `## purpose (duration)` line right above: {sorted(targets - set(listed))}"
    assert not set(listed) - targets, f"listed, but no such target: {sorted(set(listed) - targets)}"
    undated = [name for name, line in listed.items() if not DURATION.search(line)]
    assert not undated, f"these lines do not end in a (duration): {undated}"
    assert not (tmp_path / "no-venv").exists(), "make help must not create the venv"
