"""Import a family's model code: the service side of the manifests that ``contract.families`` reads."""

from __future__ import annotations

import importlib
import pkgutil

from contract.families import Family
from methods.sdk.method import Method


def method_classes(family: Family) -> list[type[Method]]:
    """Import every module of the family's package and return its methods, in the order its source declares them.

    A method is a ``Method`` subclass defined in the package with its own ``name``; the names must be
    those ``contract.families`` read from the source (the orchestrator's view and the service's agree).
    """
    package = importlib.import_module(family.module)
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{family.module}."):
        importlib.import_module(info.name)
    found: dict[str, type[Method]] = {}
    pending: list[type[Method]] = []
    children = Method.__subclasses__()
    while True:
        for cls in children:
            pending.append(cls)
            if cls.__module__.startswith(f"{family.module}.") or cls.__module__ == family.module:
                if "name" in vars(cls):
                    found.setdefault(cls.name, cls)
        if not pending:
            break
        children = pending.pop().__subclasses__()
    if set(found) != set(family.methods):
        raise RuntimeError(
            f"family {family.name}: its source declares {family.methods} but {family.module} defines "
            f"{tuple(sorted(found))}"
        )
    classes = [found[name] for name in family.methods]
    kinds = {m.name: m.kind for m in classes if m.kind != family.kind}
    if kinds:
        raise RuntimeError(f"family {family.name}: manifest says kind {family.kind!r} but {family.module} has {kinds}")
    return classes
