"""Replicas behind a DNS name (Swarm dnsrr, Kubernetes headless Service): one endpoint per address."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.cli.options import parse_endpoints
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.discovery import DiscoveryError, resolve_replicas
from tests.conftest import TINY_SWEEP


def test_localhost_resolves_to_its_ipv4_address():
    assert resolve_replicas("dns:///localhost:50051") == ["127.0.0.1:50051"]


def test_every_address_of_a_name_is_a_replica_and_new_ones_join(monkeypatch):
    behind = {"gnn": ["10.0.1.7", "10.0.1.5", "10.0.1.7"]}

    def fake(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in behind[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    endpoints = parse_endpoints(["gnn=dns:///gnn:50051", "gnn=10.0.1.9:50051"])
    assert endpoints == {"gnn": ["dns:///gnn:50051", "10.0.1.9:50051"]}
    directory = ServiceDirectory(resolve_methods(["gcn"]), endpoints=endpoints)
    pool = directory._pool("gcn")
    assert pool.remote == ["10.0.1.9:50051", "10.0.1.5:50051", "10.0.1.7:50051"] and pool.capacity == 3
    behind["gnn"] = ["10.0.1.5", "10.0.1.8"]  # a task restarted at a new address
    assert directory._resolve(pool) is True
    assert pool.remote[-1] == "10.0.1.8:50051" and pool.capacity == 4
    assert directory._resolve(pool) is False


@pytest.mark.parametrize("target", ["dns:///gnn", "dns:///:50051", "dns:///gnn:port"])
def test_malformed_targets_are_named(target):
    with pytest.raises(DiscoveryError, match="dns:///NAME:PORT"):
        resolve_replicas(target)


def test_a_name_that_does_not_resolve_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["run", *TINY_SWEEP, "--endpoint", "gnn=dns:///no-such-host.invalid:50051",
                                      "--store", str(tmp_path / "r.sqlite")])  # fmt: skip
    assert result.exit_code == 2 and "does not resolve" in result.output and "Traceback" not in result.output
