"""End to end through Docker: build the images, `make up`, discover the gnn
container by its labels, check gRPC health, run a tiny sweep against it, run
one beside a second clone's `make up` (it uses only this checkout's container),
and `make down`. Skipped only when no Docker engine answers.

Run with:  make test-docker   (pytest -m docker tests/docker)
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contract.families import load_families

pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
FAMILY = "gnn"
BASE_TAG = "nodeground/base:latest"
PUBLIC_BASE = "python:3.11-slim"


def _engine_answers() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker Python package is not installed"
    try:
        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def _run(cmd: list[str], timeout: float, check: bool = True, **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, timeout=timeout, **kw)
    print(p.stdout[-4000:], p.stderr[-4000:], f"[{time.monotonic() - t0:.1f}s rc={p.returncode}]", sep="\n")
    if check and p.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def _make(*targets: str, timeout: float = 2400) -> None:
    _run(["make", *targets], timeout=timeout)


def _image_exists(tag: str) -> bool:
    return _run(["docker", "image", "inspect", tag], timeout=60, check=False).returncode == 0


def _public_base_available() -> bool:
    if _image_exists(PUBLIC_BASE):
        return True
    try:
        return _run(["docker", "pull", PUBLIC_BASE], timeout=180, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _health_status(endpoint: str, timeout: float = 3.0) -> str:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(endpoint) as ch:
        resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


def _wait_serving(endpoint: str, deadline_s: float = 180) -> str:
    import grpc

    end = time.monotonic() + deadline_s
    last = "no answer"
    while time.monotonic() < end:
        try:
            last = _health_status(endpoint)
            if last == "SERVING":
                return last
        except grpc.RpcError as exc:
            last = f"{exc.code()}: {exc.details()}"
        time.sleep(1)
    return last


def _orchestrator_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "orchestrator"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("orchestrator")
    if found:
        return [found]
    return [sys.executable, "-c", "from orchestrator.cli.main import app; app()"]


def _discovered(checkout: Path = ROOT) -> dict[str, list[str]]:
    """The gnn containers ``checkout``'s sweeps use (this checkout's by default)."""
    from orchestrator.services.containers import checkout_id, discover_containers

    return discover_containers({FAMILY: load_families()[FAMILY]}, checkout=checkout_id(checkout)).endpoints


@pytest.fixture(scope="module")
def compose_up():
    why = _engine_answers()
    if why:
        pytest.skip(why)
    # only the family under test: a GFM without fetched weights is (rightly) not healthy, and `up` waits for health
    if not _image_exists(BASE_TAG) and not _public_base_available():
        # No registry: the offline base (debootstrap + wheelhouse).
        if not list((ROOT / "wheelhouse").glob("*.whl")):
            _make("wheels")
        _make("images", "OFFLINE=1", f"FAMILIES={FAMILY}")
    else:
        _make("images", f"FAMILIES={FAMILY}")
    try:
        _make("up", f"FAMILIES={FAMILY}", timeout=600)
        end = time.monotonic() + 60
        found: dict[str, list[str]] = {}
        while time.monotonic() < end:
            found = _discovered()
            if found.get(FAMILY):
                break
            time.sleep(1)
        yield found
    finally:
        if os.environ.get("NODEGROUND_KEEP_CONTAINERS") != "1":
            _run(["docker", "ps", "-a", "--filter", "label=nodeground.family"], timeout=60, check=False)
            _make("down", timeout=300)


@pytest.fixture(scope="module")
def second_checkout(compose_up, tmp_path_factory):
    """A second clone of this commit on the same host, with its own `make up` of gnn running: another checkout's
    stack (same images, same labels but its checkout's), as another user's or another branch's would be.

    Its make runs with this checkout's environment and images (``-o install -o images``): nothing is built twice.
    """
    clone = tmp_path_factory.mktemp("second") / "nodeground"
    head = _run(["git", "rev-parse", "HEAD"], timeout=60).stdout.strip()
    _run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], timeout=300)
    _run(["git", "-C", str(clone), "checkout", "-q", head], timeout=300)
    make = ["make", "-C", str(clone), f"VENV={sys.prefix}", "-o", "install", "-o", "images"]
    try:
        _run([*make, "up", f"FAMILIES={FAMILY}"], timeout=600)
        yield clone
    finally:
        _run([*make, "down"], timeout=300, check=False)


def test_discovered_and_serving(compose_up):
    import grpc

    from contract.v1 import method_service_pb2 as pb
    from contract.v1 import method_service_pb2_grpc as pb_grpc

    endpoints = compose_up.get(FAMILY)
    assert endpoints, f"discover_endpoints() found no {FAMILY} container: {compose_up}"
    for ep in endpoints:
        host, port = ep.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0, ep
        assert _wait_serving(ep) == "SERVING", ep
        with grpc.insecure_channel(ep) as ch:
            desc = pb_grpc.MethodServiceStub(ch).Describe(pb.DescribeRequest(), timeout=30)
        assert desc.family == FAMILY, desc
        assert {"mlp", "gcn"} <= {m.name for m in desc.methods}, desc


def test_sweep_runs_against_containers(compose_up, tmp_path):
    endpoints = compose_up.get(FAMILY) or []
    assert endpoints, compose_up
    assert all(_wait_serving(ep) == "SERVING" for ep in endpoints)
    store = tmp_path / "runs.sqlite"
    _run(
        _orchestrator_cmd()
        + [
            "run",
            "--methods",
            "mlp,gcn",
            "--datasets",
            "synthetic-homophilous",
            "--regimes",
            "10/10/80",
            "--splits",
            "0",
            "--budget",
            "2",
            "--services",
            "docker",
            "--store",
            str(store),
        ],
        timeout=1200,
    )
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT method, status, error, endpoint FROM trials ORDER BY method").fetchall()
    assert len(rows) == 4, rows
    assert all(status == "ok" for _, status, _, _ in rows), rows
    assert sorted({m for m, *_ in rows}) == ["gcn", "mlp"], rows
    ports = {ep.rsplit(":", 1)[1] for ep in endpoints}
    for _, _, _, endpoint in rows:
        assert endpoint and any(endpoint.endswith(":" + p) for p in ports), (endpoint, endpoints)


def test_a_sweep_beside_another_checkouts_stack_uses_only_its_own_containers(compose_up, second_checkout, tmp_path):
    from orchestrator.services.containers import checkout_id, family_version

    ours, theirs = compose_up.get(FAMILY) or [], _discovered(second_checkout).get(FAMILY) or []
    assert ours and theirs and not set(ours) & set(theirs), (ours, theirs)
    store = tmp_path / "runs.sqlite"
    run = _run(
        _orchestrator_cmd()
        + ["run", "--methods", "mlp", "--datasets", "synthetic-homophilous", "--regimes", "10/10/80"]
        + ["--splits", "0", "--budget", "1", "--services", "docker", "--store", str(store)],
        timeout=1200,
    )
    said = [line for line in run.stderr.splitlines() if line.startswith("using ")]
    print("the sweep said:", *said, sep="\n  ")
    version = family_version(load_families()[FAMILY])
    assert said == [
        f"using {len(ours)} container{'s' if len(ours) > 1 else ''} of this checkout (project {checkout_id(ROOT)}): "
        f"{FAMILY} {version}{f' x{len(ours)}' if len(ours) > 1 else ''}; ignored {len(theirs)} container"
        f"{'s' if len(theirs) > 1 else ''} of other checkouts ({FAMILY}; --endpoint FAMILY=HOST:PORT uses any service)"
    ], run.stderr
    with sqlite3.connect(store) as db:
        trials = db.execute("SELECT status, endpoint FROM trials").fetchall()
        services = [row[0] for row in db.execute("SELECT endpoint FROM services")]
    assert trials and all(status == "ok" and endpoint in ours for status, endpoint in trials), (trials, ours)
    assert services and set(services) <= set(ours), (services, ours, theirs)


def test_down_removes_a_network_compose_cannot(docker_engine):
    """Compose fails to remove a network that still has an endpoint ("has active endpoints", also left by
    Docker 20.10 after the containers are gone); `make down` then disconnects it, removes the network, exits 0."""
    project = f"ngdowntest{os.getpid()}"
    label = f"com.docker.compose.project={project}"
    network = f"{project}_default"
    _run(
        [
            "docker",
            "network",
            "create",
            "--label",
            label,
            "--label",
            "com.docker.compose.network=default",
            "--label",
            "com.docker.compose.version=1.29.2",
            network,
        ],
        timeout=60,
    )
    holder = _run(
        ["docker", "run", "-d", "--rm", "--network", network, BASE_TAG, "sleep", "300"], timeout=120
    ).stdout.strip()
    try:
        down = _run(["make", "down", f"COMPOSE_PROJECT={project}"], timeout=300, check=False)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "disconnecting stale endpoint" in down.stderr
        left = _run(["docker", "network", "ls", "-q", "--filter", f"label={label}"], timeout=60).stdout.strip()
        assert not left, left
    finally:
        _run(["docker", "rm", "-f", holder], timeout=60, check=False)
        _run(["docker", "network", "rm", network], timeout=60, check=False)
