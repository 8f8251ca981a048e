"""Every GFM family image, as built by `make images`, passes `orchestrator validate` in the sandbox,
and an in-context GFM under a tight container memory limit refuses a large task with its estimate
instead of being killed.

GraphAny, RGVT and Node4All run with the official checkpoints from the mirror
(mounted read-only at /weights); GraphPFN, NodePFN and G2T-FM, whose weights
cannot be fetched here, run the official structure with random-init weights
(shrunk, as in the method tests, so the 20k-node check stays short on a CPU).

Run with:  make test-docker   (needs `make images`; CI builds them first)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import grpc
import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from tests.docker.conftest import IMAGE_PREFIX

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL = ["graphany", "gvt", "node4all"]
IN_CONTEXT = ["graphpfn", "nodepfn", "g2tfm"]
RANDOM_INIT = ["--env", "NODEGROUND_RANDOM_INIT_WEIGHTS=1"]
SANDBOX = ["--call-timeout", "600", "--memory", "4g", "--cpus", "2"]


def _mirror() -> Path:
    return Path(os.environ.get("NODEGROUND_MIRROR") or ROOT.parent / "shared" / "mirror")


@pytest.fixture
def image(request, docker_engine) -> str:
    tag = f"{IMAGE_PREFIX}/{request.param}:latest"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0:
        pytest.fail(f"image {tag} is missing: build it with `make images` (offline: `make images OFFLINE=1`)")
    return tag


def _validate(*args: str) -> str:
    result = CliRunner().invoke(app, ["validate", *args, *SANDBOX])
    print(result.output)
    assert result.exit_code == 0, result.output
    assert "all 11 checks passed" in result.output
    return result.output


@pytest.mark.parametrize("image", OFFICIAL, indirect=True)
def test_official_checkpoint_images_validate(image):
    mirror = _mirror()
    if not (mirror / "MANIFEST.tsv").exists():
        pytest.skip(f"no mirror with the official checkpoints at {mirror} (set NODEGROUND_MIRROR)")
    _validate(image, "--weights", str(mirror))


@pytest.mark.parametrize("image", IN_CONTEXT, indirect=True)
def test_in_context_images_validate_with_random_init(image):
    _validate(image, *RANDOM_INIT, "--env", "NODEGROUND_RANDOM_INIT_ARCH=tiny")


@pytest.mark.parametrize("image", ["nodepfn"], indirect=True)
def test_tight_container_refuses_with_its_estimate_and_stays_up(image):
    """A 1 GiB container: the budget comes from the cgroup, so the fit is refused, not OOM-killed."""
    from contract.wire import make_bundle
    from orchestrator.services.client import MethodClient
    from orchestrator.services.sandbox import Sandbox, SandboxLimits
    from tests.conftest import tiny_graph

    n = 30_000
    x, edges, y = tiny_graph(n, classes=4, features=32)
    labels = np.where(np.arange(n) < n // 2, y, -1)
    bundle = make_bundle(x, edges, labels, 4)
    env = {"NODEGROUND_RANDOM_INIT_WEIGHTS": "1"}  # the official (full) structure
    with Sandbox(image, SandboxLimits(memory="1g", cpus=2), env=env) as sandbox:
        client = MethodClient(sandbox.endpoint)
        try:
            client.wait_healthy(120)
            client.ensure_graph(bundle, timeout=120)
            train, val = np.arange(0, n // 2, 2), np.arange(1, n // 2, 2)
            with pytest.raises(grpc.RpcError) as refused:
                client.fit("nodepfn", bundle.graph_hash, train, val, {}, seed=0, time_limit=None)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
            assert "estimated" in refused.value.details() and "budget" in refused.value.details()
            client.wait_healthy(10)  # still serving: refused before running, not killed
        finally:
            client.close()
