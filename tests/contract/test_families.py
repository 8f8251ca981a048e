"""A method is declared once, by its class: the torch-free reader and the service find the same methods,
and adding a method to a family is one new file."""

from __future__ import annotations

import dataclasses
import sys

from contract.families import declared_methods, load_families

MANIFEST = 'family = "ngfam"\nkind = "supervised"\n'
METHOD = """
import numpy as np

from methods.sdk import Method


class {cls}(Method):
    {assignment}
    capabilities = Method.capabilities
    default_config = {{}}

    def fit(self, graph, train, val, config, ctx):
        return graph.num_classes

    def predict(self, state, graph):
        return np.full((graph.num_nodes, state), 1.0 / state, dtype=np.float32)
"""


def _family(root, files: dict[str, str]) -> None:
    folder = root / "ngfam"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.toml").write_text(MANIFEST)
    (folder / "__init__.py").write_text('"""A test family."""\n')
    for name, text in files.items():
        (folder / name).write_text(text)


def test_the_source_declares_the_methods_and_one_new_file_adds_one(tmp_path, monkeypatch):
    from methods.families import method_classes

    _family(tmp_path, {
        "alpha.py": METHOD.format(cls="Alpha", assignment='name = "alpha"\n    version = "2026-12-01"'),
        "beta.py": METHOD.format(cls="Beta", assignment='name, version = "beta", "2026-12-01"')
        + '\n\nclass _Helper:\n    name = "not a method: private and without a Method base"\n',
    })  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    assert declared_methods(tmp_path / "ngfam") == ("alpha", "beta")
    (tmp_path / "ngfam" / "gamma.py").write_text(
        METHOD.format(cls="Gamma", assignment='name = "gamma"\n    version = "2026-12-01"')
    )
    family = load_families(tmp_path)["ngfam"]
    assert family.methods == ("alpha", "beta", "gamma")  # the one new file is the whole change
    assert family.module == "methods.ngfam"
    hosted = dataclasses.replace(family, module="ngfam")  # importable from tmp_path, not from methods/
    assert [m.name for m in method_classes(hosted)] == [
        "alpha",
        "beta",
        "gamma",
    ]  # the service hosts what the reader found
    for module in [m for m in sys.modules if m == "ngfam" or m.startswith("ngfam.")]:
        del sys.modules[module]
