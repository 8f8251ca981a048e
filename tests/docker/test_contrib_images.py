"""Contributed images through Docker: the scaffold passes `orchestrator validate` unchanged and its Lite submission
is ranked among the shipped reference; a broken
image is caught, and a hostile image is contained by the sandbox while its results are recorded.
(The Node.js method's image is validated with every built-in image by `make validate-images`, in the
README's user path.)

Run with:  make test-contrib   (needs the family images: make images)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.registry import dataset_size
from orchestrator.reference import load_reference
from orchestrator.reference.compare import REFERENCE, SUBMITTED
from tests.docker.conftest import IMAGE_PREFIX

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_IMAGES = ROOT / "tests" / "docker" / "images"
BASE = os.environ.get("BASE_TAG") or f"{IMAGE_PREFIX}/base:latest"
FAST = ["--call-timeout", "120", "--deadline", "1", "--grace", "10", "--memory", "2g", "--cpus", "1"]


def _sh(cmd: list[str], timeout: float = 1200, cwd: Path = ROOT) -> str:
    p = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def _has_image(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


@pytest.fixture(scope="module", autouse=True)
def engine(docker_engine):
    if not (_has_image(BASE) and _has_image(f"{IMAGE_PREFIX}/gnn:latest")):
        _sh(["make", "images"], timeout=3600)


def _validate(target: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", target, *FAST])
    print(result.output)
    return result.exit_code, result.output


def test_scaffold_builds_and_validates_unchanged(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    for name in ("pyproject.toml", "README.md", ".dockerignore", "Makefile"):
        shutil.copy(ROOT / name, ctx / name)
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info")
    for folder in ("contract", "methods", "docker"):
        shutil.copytree(ROOT / folder, ctx / folder, ignore=ignore)
    out = CliRunner().invoke(app, ["methods", "new", "democi", "--root", str(ctx)])
    assert out.exit_code == 0, out.output
    _sh(["make", "image-democi", f"BASE_TAG={BASE}"], cwd=ctx)  # what the scaffold tells a user to run
    try:
        code, output = _validate(f"{IMAGE_PREFIX}/democi")
        assert code == 0, output
        # then what a contributor does next: a Lite submission, ranked among the shipped reference
        dataset = min(load_reference("lite")[1].datasets, key=lambda d: dataset_size(d).nodes)
        bundle = tmp_path / "democi-lite"
        lite = ["--protocol", "lite", "--datasets", dataset, "--out", str(bundle), "--cpus", "1", "--memory", "2g"]
        submitted = CliRunner().invoke(app, ["submit", f"{IMAGE_PREFIX}/democi", *lite])
        assert submitted.exit_code == 0, submitted.output
        site = tmp_path / "report"
        ranked = CliRunner().invoke(app, ["report", "--bundle", str(bundle), "--reference", "lite", "--out", str(site),
                                          "--bootstrap-rounds", "20"])  # fmt: skip
        assert ranked.exit_code == 0, ranked.output
        assert "democi: 2/" in ranked.output and "reference cells; missing" in ranked.output  # coverage stated
        entries = pd.read_csv(site / "tables" / "entries.csv").set_index("method")["status"]
        assert entries["democi"] == SUBMITTED and (entries.drop("democi") == REFERENCE).all()
    finally:
        subprocess.run(["docker", "rmi", "-f", f"{IMAGE_PREFIX}/democi:latest"], capture_output=True)


def test_broken_image_is_caught():
    _sh(
        ["docker", "build", "-q", "--build-arg", "MODE=crash-isolated", "-t", "nodeground/fixture-crash:latest", "."],
        cwd=FIXTURE_IMAGES,
    )
    code, output = _validate("nodeground/fixture-crash")
    assert code == 1
    assert "FAIL" in output and "isolated-nodes" in output and "stopped answering" in output


def _host_ips() -> list[str]:
    ips = {"172.17.0.1"}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ips.add(s.getsockname()[0])
    except OSError:
        pass
    return sorted(ips)


def test_hostile_image_is_contained_and_recorded(tmp_path):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, addr = listener.accept()
                accepted.append(addr[0])
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    targets = ",".join([f"{ip}:{port}" for ip in _host_ips()] + ["1.1.1.1:53"])
    _sh(
        [
            "docker",
            "build",
            "-q",
            "--build-arg",
            "MODE=hostile",
            "--build-arg",
            f"PROBE_TARGETS={targets}",
            "-t",
            "nodeground/fixture-hostile:latest",
            ".",
        ],
        cwd=FIXTURE_IMAGES,
    )
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "w.bin").write_text("frozen")
    bundle = tmp_path / "bundle"
    try:
        result = CliRunner().invoke(
            app,
            [
                "submit",
                "nodeground/fixture-hostile",
                "--datasets",
                "synthetic-tiny",
                "--regimes",
                "10/10/80",
                "--splits",
                "0",
                "--budget",
                "2",
                "--out",
                str(bundle),
                "--id",
                "hostile",
                "--weights",
                str(weights),
                "--memory",
                "2g",
                "--cpus",
                "1",
                "--parallel",
                "2",  # both trials in flight at once, one in each sandbox: each is contained
            ],
        )
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
    print(result.output)
    assert result.exit_code == 0, result.output
    assert accepted == [], f"the sandboxed image reached the host listener from {accepted}"
    assert sorted(p.name for p in weights.iterdir()) == ["w.bin"] and (weights / "w.bin").read_text() == "frozen"

    with sqlite3.connect(bundle / "trials.sqlite") as db:
        rows = db.execute("SELECT status, origin, fit_info_json, extra_json FROM trials").fetchall()
    assert len(rows) == 2
    for status, origin, info_json, extra_json in rows:
        assert status == "ok" and origin == "user:hostile"
        info = json.loads(info_json)
        assert info == {
            "network": "blocked",
            "write_outside_tmp": "blocked",
            "tmp_write": "ok",
            "weights_read": "frozen",
        }, info
        sandbox = json.loads(extra_json)["sandbox"]
        assert sandbox["network_mode"] == "none" and sandbox["read_only_rootfs"] and sandbox["cap_drop"] == ["ALL"]
        assert "no-new-privileges" in sandbox["security_opt"] and sandbox["user"] == "10001:10001"
        assert sandbox["memory_bytes"] == 2 << 30 and sandbox["nano_cpus"] == 10**9
        assert sandbox["mounts"] == [{"source": str(weights.resolve()), "destination": "/weights", "rw": False}]

    from orchestrator.submission.bundle import verify_bundle
    from orchestrator.trial_table.load import load_trials

    verify_bundle(bundle)
    submission = json.loads((bundle / "submission.json").read_text())
    assert submission["image"]["id"].startswith("sha256:")
    assert submission["describe"]["methods"][0]["name"] == "probe"
    assert "submit nodeground/fixture-hostile" in submission["command"] and submission["hardware"]["cpu_count"]
    assert submission["sandboxes"] == 2 and "--parallel 2" in submission["command"]
    assert set(load_trials(bundle / "trials.sqlite")["origin"].astype(str)) == {"user:hostile"}
