"""The GPU compose override: :cuda images, one replica of each family per GPU, CPU when there is none."""

from __future__ import annotations

import pytest
import yaml

from orchestrator.services.gpus import cuda_image, gpu_override, main, visible_gpus
from tests.docker.test_services import services as docker_services

COMPOSE = yaml.safe_load(docker_services.compose_text())


def test_one_replica_per_gpu_each_pinned_to_its_device_with_the_family_labels():
    services = gpu_override(COMPOSE, ["0", "3"])["services"]
    for name, base in COMPOSE["services"].items():
        first, copy = services[name], services[f"{name}-gpu3"]
        assert first["image"] == copy["image"] == base["image"].replace(":latest", ":cuda")
        assert first["deploy"]["resources"]["reservations"]["devices"] == [
            {"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}
        ]
        assert copy["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["3"]
        assert (
            copy["labels"] == base["labels"] and copy["ports"] == base["ports"]
        )  # discovered as replicas of the family
        assert copy.get("profiles") == base.get("profiles")
    assert len(services) == 2 * len(COMPOSE["services"])


def test_without_a_gpu_the_cuda_images_run_on_cpu(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert visible_gpus() == []
    out, compose = tmp_path / "override.yaml", tmp_path / "compose.yaml"
    compose.write_text(docker_services.compose_text())
    assert main(["--compose", str(compose), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("no NVIDIA GPU visible")
    services = yaml.safe_load(out.read_text())["services"]
    assert all(s == {"image": cuda_image(COMPOSE["services"][n]["image"])} for n, s in services.items())


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("nodeground/gnn:latest", "nodeground/gnn:cuda"),
        ("nodeground/gnn", "nodeground/gnn:cuda"),
        ("registry.local:5000/ng/gnn", "registry.local:5000/ng/gnn:cuda"),
        ("registry.local:5000/ng/gnn:v2", "registry.local:5000/ng/gnn:cuda"),
    ],
)
def test_cuda_tag(image, cuda):
    assert cuda_image(image) == cuda


def test_gpus_given_are_taken_as_given():
    assert visible_gpus(" 0, 2 ") == ["0", "2"]
