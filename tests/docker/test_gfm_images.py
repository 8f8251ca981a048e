"""An in-context GFM under a tight container memory limit refuses a large task with its estimate
instead of being killed.

That every GFM image passes `orchestrator validate` (GraphAny, RGVT and Node4All on the checkpoints
`make weights` fetched; GraphPFN, NodePFN and G2T-FM on random-init weights) is checked once, by
`make validate-images` in the README's user path (tests/docker/test_user_path.py).

Run with:  make test-docker   (needs `make images`; CI builds them first)
"""

from __future__ import annotations

import subprocess

import grpc
import numpy as np
import pytest

from tests.docker.conftest import IMAGE_PREFIX

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]


@pytest.fixture
def image(request, docker_engine) -> str:
    tag = f"{IMAGE_PREFIX}/{request.param}:latest"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0:
        pytest.fail(f"image {tag} is missing: build it with `make images` (offline: `make images OFFLINE=1`)")
    return tag


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
