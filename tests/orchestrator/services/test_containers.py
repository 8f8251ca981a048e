"""discover_containers() against a fake Docker client, and without an engine."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from contract.families import load_families
from orchestrator.services import containers as ct

FAMILIES = load_families()
GNN = {"gnn": FAMILIES["gnn"]}
HERE = ct.checkout_id()
GNN_VERSION = ct.family_version(FAMILIES["gnn"])


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


def _labels(family, checkout=HERE, version=None, **extra):
    """What `make up` of checkout ``checkout`` puts on a family's container (docker/services.py)."""
    labels = {"nodeground.family": family, "nodeground.port": "50051", "com.docker.compose.service": family}
    if checkout is not None:
        labels["nodeground.checkout"] = checkout
        labels["nodeground.version"] = ct.family_version(FAMILIES[family]) if version is None else version
    return labels | extra


def _container(name, host_port, family="gnn", host_ip="127.0.0.1", status="running", **labels):
    return FakeContainer(
        name, _labels(family, **labels), {"50051/tcp": [{"HostIp": host_ip, "HostPort": str(host_port)}]}, status
    )


def _discover(items, families=GNN):
    return ct.discover_containers(families, client_factory=lambda: FakeClient(items))


def test_groups_this_checkouts_running_containers_by_family():
    client = FakeClient(
        [_container("gnn_2", 49160), _container("gnn_1", 49153), _container("graphany_1", 32768, "graphany")]
    )
    got = ct.discover_containers(FAMILIES, client_factory=lambda: client)
    assert got.endpoints == {"gnn": ["127.0.0.1:49153", "127.0.0.1:49160"], "graphany": ["127.0.0.1:32768"]}
    assert got.versions == {"gnn": GNN_VERSION, "graphany": ct.family_version(FAMILIES["graphany"])}
    assert client.containers.filters == {"label": "nodeground.family", "status": "running"}
    assert client.closed


def test_another_checkouts_containers_are_counted_never_used():
    """The defect: any container with the family label was used, another clone's or another user's too."""
    got = _discover(
        [
            _container("theirs", 40000, checkout="ng-other-0123abcd"),
            _container("unlabelled", 40001, checkout=None),  # `docker run -P nodeground/gnn`, or an older `make up`
            _container("mine", 40002),
        ]
    )
    assert got.endpoints == {"gnn": ["127.0.0.1:40002"]}
    assert got.foreign == {"gnn": 2}


def test_only_the_sweeps_families_are_used_or_counted():
    got = _discover([_container("graphany", 40000, "graphany"), _container("theirs", 40001, "graphany", checkout="x")])
    assert got.endpoints == {} and got.foreign == {} and got.summary() is None


def test_one_line_says_which_containers_are_used_and_how_many_were_ignored():
    got = _discover(
        [
            _container("gnn_1", 40000),
            _container("gnn-gpu1_1", 40001, **{"com.docker.compose.service": "gnn-gpu1"}),  # make up GPU=1's replica
            _container("theirs_1", 40002, checkout="ng-other-0123abcd"),
            _container("theirs_2", 40003, checkout="ng-other-0123abcd"),
        ]
    )
    assert got.endpoints == {"gnn": ["127.0.0.1:40000", "127.0.0.1:40001"]}
    assert got.summary() == (
        f"using 2 containers of this checkout (project {HERE}): gnn {GNN_VERSION} x2; ignored 2 containers of other "
        "checkouts (gnn; --endpoint FAMILY=HOST:PORT uses any service)"
    )
    one = _discover([_container("gnn_1", 40000)]).summary()
    assert one == f"using 1 container of this checkout (project {HERE}): gnn {GNN_VERSION}"
    only_theirs = _discover([_container("theirs", 40002, checkout="ng-other-0123abcd")])
    assert only_theirs.endpoints == {}
    assert only_theirs.summary() == (
        f"using no containers of this checkout (project {HERE}); ignored 1 container of other checkouts (gnn; "
        "--endpoint FAMILY=HOST:PORT uses any service)"
    )


def test_a_container_of_another_version_is_refused_in_one_line():
    with pytest.raises(ct.ContainerMismatch) as refused:
        _discover([_container("gnn_1", 40000), _container("gnn_2", 40001, version="2020-01-01")])
    assert str(refused.value) == (
        f"this checkout's containers (project {HERE}) run other versions than it holds: gnn 2020-01-01 and "
        f'{GNN_VERSION} (this checkout: {GNN_VERSION}); restart them with `make up FAMILIES="gnn"`, or name a service '
        "with --endpoint FAMILY=HOST:PORT"
    )
    assert "\n" not in str(refused.value)
    # another checkout's container of another version is only ignored
    assert _discover([_container("theirs", 40000, checkout="x", version="2020-01-01")]).foreign == {"gnn": 1}


def test_skips_stopped_unpublished_sandboxed_and_swarm_task_containers(caplog):
    items = [
        FakeContainer("other", {"app": "x"}, {"50051/tcp": [{"HostIp": "127.0.0.1", "HostPort": "1"}]}),
        _container("exited", 40000, status="exited"),
        # `validate` runs an image with its family label but no published port: not a service to use
        FakeContainer("sandbox", _labels("gnn", **{ct.SANDBOX_LABEL: "method"}), {}),
        # a Swarm task is reached on its overlay network, by --endpoint gnn=dns:///gnn:50051
        FakeContainer("gnn.1.x", _labels("gnn", **{ct.SWARM_TASK_LABEL: "x"}), {}),
        _container("ok", 40001),
    ]
    with caplog.at_level("WARNING"):
        assert _discover(items).endpoints == {"gnn": ["127.0.0.1:40001"]}
    assert not caplog.records
    unpublished = FakeContainer("unpublished", _labels("gnn"), {"50051/tcp": None})
    with caplog.at_level("WARNING"):
        assert _discover([unpublished]).endpoints == {}
    assert "does not publish port 50051" in caplog.text


def test_port_label_and_wildcard_host():
    c = FakeContainer(
        "custom",
        _labels("gnn") | {"nodeground.port": "6000"},
        {
            "50051/tcp": [{"HostIp": "127.0.0.1", "HostPort": "1111"}],
            "6000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "2222"}, {"HostIp": "::", "HostPort": "2222"}],
        },
    )
    assert _discover([c]).endpoints == {"gnn": ["127.0.0.1:2222"]}


def test_the_checkout_id_is_a_compose_project_and_stack_name_of_its_path(tmp_path):
    one, two = tmp_path / "NodeGround main", tmp_path / "clone"
    ids = {ct.checkout_id(one), ct.checkout_id(two), ct.checkout_id(Path("/"))}
    assert len(ids) == 3 and ct.checkout_id(one) == ct.checkout_id(one)
    assert ct.checkout_id(one).startswith("ng-nodeground-main-")
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) for name in ids), ids  # compose v1 and v2, Swarm stacks


def test_no_labelled_containers_is_empty():
    assert _discover([]).endpoints == {}
    assert _discover([]).summary() is None


def test_engine_errors_are_empty_not_raised():
    def broken():
        raise ConnectionError("Error while fetching server API version")

    assert ct.discover_containers(GNN, client_factory=broken).endpoints == {}

    class ListFails(FakeClient):
        def __init__(self):
            super().__init__([])
            self.containers.list = lambda **kw: (_ for _ in ()).throw(RuntimeError("500 Server Error"))

    assert ct.discover_containers(GNN, client_factory=ListFails).endpoints == {}


def test_no_engine_at_docker_host(monkeypatch, tmp_path):
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    assert ct.discover_containers(GNN, timeout=1).endpoints == {}


def test_without_docker_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)  # import docker -> ImportError
    assert ct.discover_containers(GNN).endpoints == {}
