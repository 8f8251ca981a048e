"""What can refuse a sweep before its first trial: a dataset that cannot be had, a public split that does not
exist, a service that does not host its method, is not ready, or describes it otherwise than its family's
committed description (``contract.descriptions``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contract.descriptions import GENERATOR, DescriptionError, MethodSpec, spec_differences
from orchestrator.data.registry import ensure_dataset, load_dataset
from orchestrator.data.splits import PUBLIC, SplitError, graph_split
from orchestrator.plan import SweepPlan
from orchestrator.services.client import ServiceNotReady, ServiceUnavailable
from orchestrator.services.directory import Directory
from orchestrator.warmup import all_at_once


def check_datasets(plan: SweepPlan, datasets: Iterable[str] | None = None) -> None:
    """Plan-level checks, before any service starts or any trial runs: every dataset asked for is fetched and
    verified (a missing file is said in seconds, not after the services have started), every public split
    asked for exists."""
    names = list(plan.datasets if datasets is None else datasets)
    for name in names:
        ensure_dataset(name)
    if PUBLIC not in plan.regimes:
        return
    problems = []
    for name in names:
        graph = load_dataset(name)
        for index in plan.splits:
            try:
                graph_split(graph, PUBLIC, index)
            except SplitError as exc:
                problems.append(str(exc))
                break
    if problems:
        raise SplitError(f"--regimes public: {'; '.join(problems)}")


def live_spec(directory: Directory, method: str, descriptions: Mapping[str, MethodSpec]) -> MethodSpec:
    """What the method's service describes (this starts the service when it is not up yet)."""
    client = directory.client(method)
    hosted = {s.name: s for s in client.describe()}
    if method not in hosted:
        raise ServiceUnavailable(
            f"the service at {client.endpoint} does not host {method!r} (it hosts {', '.join(hosted)})"
        )
    live = hosted[method]
    described = descriptions.get(method)
    if described is not None:
        differences = spec_differences(described, live)
        if differences:
            raise DescriptionError(
                f"the service at {client.endpoint} describes {method} ({live.version}) otherwise than its "
                f"family's description ({described.version}): {', '.join(differences)} differ; run a service "
                f"built from this checkout, or regenerate the description with `{GENERATOR} {described.family}`"
            )
    return live


def describe_services(
    directory: Directory, methods: list[str], descriptions: Mapping[str, MethodSpec]
) -> dict[str, MethodSpec | ServiceNotReady]:
    """Each method's ``live_spec``, or why its service is not ready; describing starts the methods' services, the
    replicas of different pools at once."""
    groups: dict[str, list[str]] = {}
    for method in methods:  # one group per set of replicas: they start at once, each group's methods in turn
        groups.setdefault(directory.pool_key(method), []).append(method)
    found: dict[str, MethodSpec | ServiceNotReady] = {}

    def describe(group: list[str]) -> None:
        for method in group:
            try:
                found[method] = live_spec(directory, method, descriptions)
            except ServiceNotReady as exc:
                found[method] = exc

    all_at_once(describe, list(groups.values()), "describe")
    return found
