"""The images' pinned closures and the host's lock agree: one version of each package the two share."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;#+]+)")


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` of every exact pin in a requirements file (names normalised, local labels dropped)."""
    out = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            out[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return out


def test_the_lock_pins_every_line_exactly():
    lines = [
        line for line in (REPO / "requirements.lock").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert lines and all(PIN.match(line) for line in lines), [line for line in lines if not PIN.match(line)]
    assert "torch" in pins(REPO / "requirements.lock")


def test_the_cpu_images_pin_what_the_host_lock_pins():
    lock = pins(REPO / "requirements.lock")
    images = {**pins(REPO / "docker" / "requirements.txt"), **pins(REPO / "docker" / "requirements-orchestrator.txt")}
    differ = {name: (version, lock[name]) for name, version in images.items() if name in lock and lock[name] != version}
    assert not differ, f"image pin vs requirements.lock: {differ}"
