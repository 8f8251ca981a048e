"""Import a family's model code: the service side of the manifests that ``contract.families`` reads."""

from __future__ import annotations

import importlib

from contract.families import Family


def method_classes(family: Family) -> list:
    """Import the family's module and return its METHODS, checked against the manifest."""
    module = importlib.import_module(family.module)
    classes = list(module.METHODS)
    names = tuple(m.name for m in classes)
    if names != family.methods:
        raise RuntimeError(f"family {family.name}: manifest lists {family.methods} but {family.module} defines {names}")
    kinds = {m.name: m.kind for m in classes if m.kind != family.kind}
    if kinds:
        raise RuntimeError(f"family {family.name}: manifest says kind {family.kind!r} but {family.module} has {kinds}")
    return classes
