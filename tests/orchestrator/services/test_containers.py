"""discover_endpoints() against a fake Docker client, and without an engine."""

from __future__ import annotations

import sys

import pytest

from orchestrator.services import containers as ct


class FakeContainer:
    def __init__(self, name, labels, ports, status="running"):
        self.name = name
        self.attrs = {
            "Config": {"Labels": labels},
            "State": {"Status": status},
            "NetworkSettings": {"Ports": ports},
        }


class FakeContainers:
    def __init__(self, items):
        self.items = items
        self.filters = None

    def list(self, filters=None, **kw):
        self.filters = filters
        return list(self.items)


class FakeClient:
    def __init__(self, items):
        self.containers = FakeContainers(items)
        self.closed = False

    def close(self):
        self.closed = True


def _gnn(name, host_port, host_ip="127.0.0.1", **kw):
    return FakeContainer(
        name,
        {"nodeground.family": "gnn", "nodeground.port": "50051", "com.docker.compose.service": "gnn"},
        {"50051/tcp": [{"HostIp": host_ip, "HostPort": str(host_port)}]},
        **kw,
    )


def test_groups_running_containers_by_family():
    client = FakeClient(
        [
            _gnn("nodeground_gnn_2", 49160),
            _gnn("nodeground_gnn_1", 49153),
            FakeContainer(
                "gfm",
                {"nodeground.family": "gfm", "nodeground.port": "50051"},
                {"50051/tcp": [{"HostIp": "127.0.0.1", "HostPort": "32768"}]},
            ),
        ]
    )
    got = ct.discover_endpoints(client_factory=lambda: client)
    assert got == {
        "gfm": ["127.0.0.1:32768"],
        "gnn": ["127.0.0.1:49153", "127.0.0.1:49160"],
    }
    assert client.containers.filters == {"label": "nodeground.family", "status": "running"}
    assert client.closed


def test_skips_unlabelled_stopped_and_unpublished_containers():
    client = FakeClient(
        [
            FakeContainer("other", {"app": "x"}, {"50051/tcp": [{"HostIp": "127.0.0.1", "HostPort": "1"}]}),
            _gnn("exited", 40000, status="exited"),
            FakeContainer("unpublished", {"nodeground.family": "gnn", "nodeground.port": "50051"}, {"50051/tcp": None}),
            FakeContainer("noports", {"nodeground.family": "gnn"}, {}),
            _gnn("ok", 40001),
        ]
    )
    assert ct.discover_endpoints(client_factory=lambda: client) == {"gnn": ["127.0.0.1:40001"]}


def test_sandboxed_method_containers_are_passed_over_without_a_word(caplog):
    """`validate` runs an image with its family label but no published port: not a service to use."""
    sandboxed = FakeContainer(
        "nodeground-sandbox-1", {"nodeground.family": "gnn", "nodeground.port": "50051", ct.SANDBOX_LABEL: "method"}, {}
    )
    client = FakeClient([sandboxed, _gnn("ok", 40001)])
    with caplog.at_level("WARNING"):
        assert ct.discover_endpoints(client_factory=lambda: client) == {"gnn": ["127.0.0.1:40001"]}
    assert not caplog.records


def test_port_label_and_wildcard_host():
    c = FakeContainer(
        "custom",
        {"nodeground.family": "custom", "nodeground.port": "6000"},
        {
            "50051/tcp": [{"HostIp": "127.0.0.1", "HostPort": "1111"}],
            "6000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "2222"}, {"HostIp": "::", "HostPort": "2222"}],
        },
    )
    assert ct.discover_endpoints(client_factory=lambda: FakeClient([c])) == {"custom": ["127.0.0.1:2222"]}


def test_no_labelled_containers_is_empty():
    assert ct.discover_endpoints(client_factory=lambda: FakeClient([])) == {}


def test_engine_errors_are_empty_not_raised():
    def broken():
        raise ConnectionError("Error while fetching server API version")

    assert ct.discover_endpoints(client_factory=broken) == {}

    class ListFails(FakeClient):
        def __init__(self):
            super().__init__([])
            self.containers.list = lambda **kw: (_ for _ in ()).throw(RuntimeError("500 Server Error"))

    assert ct.discover_endpoints(client_factory=ListFails) == {}


def test_no_engine_at_docker_host(monkeypatch, tmp_path):
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    assert ct.discover_endpoints(timeout=1) == {}


def test_without_docker_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    assert ct.discover_endpoints() == {}
