"""The specs of the methods a command plans, starting no service: committed descriptions, or a named endpoint's."""

from __future__ import annotations

from contract.descriptions import GENERATOR, MethodSpec, description_path
from orchestrator.cli.errors import UserError
from orchestrator.cli.services import named_by_endpoint
from orchestrator.plan import described_specs
from orchestrator.services.client import MethodClient, ServiceUnavailable
from orchestrator.services.directory import resolve_methods


def plan_specs(methods: tuple[str, ...], endpoints: dict[str, list[str]]) -> dict[str, MethodSpec]:
    """Every method's spec, starting nothing: a running ``--endpoint``'s Describe where one names the method (as
    ``run`` does), else its family's committed description. UserError (one line) for a method with neither."""
    families = resolve_methods(list(methods))
    named = [m for m in methods if named_by_endpoint(m, families, endpoints)]
    specs = described_specs([m for m in methods if m not in named], families)
    for method in methods:
        if method in specs:
            continue
        family = families[method]
        if method not in named:
            raise UserError(
                f"family {family.name} (method {method}) has no description ({description_path(family.name)}); "
                f"write it with `{GENERATOR} {family.name}` (make describe), or name its running service with "
                f"--endpoint {family.name}=HOST:PORT"
            )
        address = (endpoints.get(method) or endpoints[family.name])[0]
        client = MethodClient(address)
        try:
            hosted = {s.name: s for s in client.describe(timeout=10.0)}
        except ServiceUnavailable as exc:
            raise UserError(f"--endpoint {address}: {exc}") from None
        finally:
            client.close()
        if method not in hosted:
            raise UserError(f"the service at {address} does not host {method!r} (it hosts {', '.join(hosted)})")
        specs[method] = hosted[method]
    return specs
