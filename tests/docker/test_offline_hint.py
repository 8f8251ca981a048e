"""Without a registry, an image build ends with the way out (`OFFLINE=1`), not Docker's raw DNS error alone.

No engine is needed: a stand-in `docker` fails every build the way Docker does when it cannot resolve the registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DNS_ERROR = (
    "ERROR: failed to resolve source metadata for docker.io/library/python:3.11-slim: dial tcp: lookup "
    "registry-1.docker.io on 127.0.0.53:53: no such host"
)
HINT = "without a network, build offline: make wheels base-offline images OFFLINE=1"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


@pytest.fixture
def no_registry(tmp_path: Path) -> Path:
    """A `docker` whose images are all absent and whose builds all fail to reach the registry."""
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  image) exit 1 ;;\n"
        f"  build) cat >/dev/null; echo '{DNS_ERROR}' >&2; exit 1 ;;\n"
        "  *) exit 0 ;;\n"
        "esac\n"
    )
    fake.chmod(0o755)
    return fake


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True, text=True)


def test_an_image_build_without_a_registry_points_to_the_offline_build(no_registry):
    built = _make("image-gnn", f"DOCKER={no_registry}")
    assert built.returncode != 0
    lines = built.stderr.splitlines()
    assert DNS_ERROR in lines and HINT in built.stderr, built.stderr
    assert lines.index(DNS_ERROR) < next(i for i, line in enumerate(lines) if HINT in line)  # Docker's, then ours


def test_the_offline_build_is_not_told_to_go_offline(no_registry):
    planned = _make("-n", "images", "OFFLINE=1", f"DOCKER={no_registry}")
    assert HINT not in planned.stdout, planned.stdout
    assert HINT in _make("-n", "base", f"DOCKER={no_registry}").stdout
