"""The compose file and the Swarm stack are written from the family manifests by one reader
(docker/services.py): both deploy every family under its own name with the same image, labels and
weights mount, and neither is committed, so a new family is one new folder."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contract.families import load_families
from orchestrator.services.containers import checkout_id, family_version
from orchestrator.services.gpus import render

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docker_services", ROOT / "docker" / "services.py")
services = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(services)


def test_make_compose_writes_every_family_from_the_manifests(tmp_path):
    out = tmp_path / "compose.yaml"
    assert services.main(["compose", "--out", str(out)]) == 0
    assert out.read_text() == services.compose_text()
    assert list(yaml.safe_load(out.read_text())["services"]) == sorted(load_families())
    assert not (ROOT / "docker/compose.yaml").exists()  # generated, never committed


def test_compose_and_stack_deploy_every_family_alike():
    families = load_families()
    compose = yaml.safe_load(services.compose_text())["services"]
    stack = services.stack({"graphtransformer": 2}, "/w", gpu=False, threads=1, memory="8G", prefix="p")["services"]
    assert list(compose) == list(stack) == sorted(families)
    for name in families:
        assert (
            compose[name]["image"] == "${NODEGROUND_IMAGE_PREFIX:-nodeground}/" + f"{name}:latest"
            and stack[name]["image"] == f"p/{name}:latest"
        )
        assert (
            compose[name]["labels"]
            == stack[name]["labels"]
            == stack[name]["deploy"]["labels"]
            == {
                "nodeground.family": name,
                "nodeground.port": "50051",
                "nodeground.checkout": checkout_id(ROOT),
                "nodeground.version": family_version(families[name]),
            }
        )
        weights = (ROOT / "methods" / name / "weights.toml").exists()
        assert ("volumes" in compose[name]) == ("volumes" in stack[name]) == weights, name
        assert (
            compose[name]["environment"].get("NODEGROUND_WEIGHTS")
            == stack[name]["environment"].get("NODEGROUND_WEIGHTS")
            == "/weights"
        ) == weights
    assert stack["graphtransformer"]["deploy"]["replicas"] == 2 and stack["gnn"]["deploy"]["replicas"] == 1
    with pytest.raises(SystemExit, match="unknown family graph-transformer"):
        services.stack({"graph-transformer": 2}, "/w", gpu=False, threads=1, memory="8G")


@pytest.mark.parametrize("compose", [["docker-compose"], ["docker", "compose"]], ids=["v1", "v2"])
def test_compose_accepts_the_file(compose, tmp_path):
    if shutil.which(compose[0]) is None or subprocess.run([*compose, "version"], capture_output=True).returncode != 0:
        pytest.skip(f"{' '.join(compose)} is not installed")
    base, gpu = tmp_path / "compose.yaml", tmp_path / "compose.gpu.yaml"
    base.write_text(services.compose_text())
    gpu.write_text(render(yaml.safe_load(base.read_text()), ["0"]))
    checked = subprocess.run(  # the project `make up` names it after this checkout
        [*compose, "-p", checkout_id(ROOT), "-f", str(base), "-f", str(gpu), "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_a_tls_stack_gives_every_service_the_certificate_key_and_token_as_secrets(tmp_path):
    document = services.stack({}, "/w", gpu=False, threads=1, memory="8G", tls=tmp_path)
    assert document["secrets"] == {
        secret: {"file": str(tmp_path.resolve() / file)} for secret, (file, _) in services.SECRETS.items()
    }
    for name, service in document["services"].items():
        assert service["secrets"] == list(services.SECRETS), name
        env = service["environment"]
        assert (
            env["NODEGROUND_TLS_CERT"] == "/run/secrets/nodeground_tls_cert"
            and env["NODEGROUND_TOKEN_FILE"] == "/run/secrets/nodeground_token"
        ), name
    assert "secrets" not in services.stack({}, "/w", gpu=False, threads=1, memory="8G")
