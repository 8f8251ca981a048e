"""The in-context GFMs' weights catalog, unverified entries, and the real-weights run (marked);
each family's official structure is tested in its own folder."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from contract.weights import WeightsEntry, WeightsError, file_sha256, git_blob_sha1, load_weights_catalog
from methods.sdk.weights import resolve


def _place(root: Path, entry, data: bytes) -> Path:
    path = root / entry.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_nodepfn_and_tabpfn_verify_by_sha256_and_pearl_by_git_blob_id(tmp_path):
    """Each catalog entry with the digest its upstream publishes; a file with the right digest is official,
    one with a wrong digest is refused (the right one is the test file's own, put in a copy of the entry)."""
    catalog = load_weights_catalog()
    nodepfn, tabpfn, pearl = catalog["nodepfn-epoch30"], catalog["tabpfn-v2-classifier"], catalog["g2tfm-pearl-random"]
    assert nodepfn.integrity == ("sha256", "6c2da16cedd2646e81b3e6e36ff71f269fcb5d63d04537a25c603bf407d7a961")
    assert "/refs/tags/v1.0.0/models_ckpts/nodepfn/" in nodepfn.url
    assert tabpfn.integrity == ("sha256", "f65a35685aeef42e31b796d9bfa34e68d6fc780bc98e7bff7763802964cf435f")
    assert "/resolve/6d4df8b4cf086282df228a3e7d0addca00c1fd7e/" in tabpfn.url  # a revision, not main
    assert pearl.integrity == ("git_blob_sha1", "64795a38350d96bc3d5fa4b9d279cf7612e76964")
    assert "/raw/e01d796303904c358dce968571560a9803bae8a9/" in pearl.url
    data = b"a checkpoint's bytes"
    for entry in (nodepfn, tabpfn, pearl):
        path = _place(tmp_path, entry, data)
        with pytest.raises(WeightsError, match="fail verification"):
            resolve(entry, tmp_path)  # the upstream digest: these bytes are not the upstream file
        kind, _ = entry.integrity
        right = file_sha256(path) if kind == "sha256" else git_blob_sha1(path)
        resolved = resolve(dataclasses.replace(entry, **{kind: right}), tmp_path)
        assert resolved.official and resolved.sha256 == file_sha256(path)


def test_git_blob_id_is_gits_own(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 3)
    assert git_blob_sha1(path) == subprocess.check_output(["git", "hash-object", str(path)], text=True).strip()


def test_unverified_entries_say_why_and_are_refused_unless_allowed(tmp_path):
    catalog = load_weights_catalog()
    unverified = [e for e in catalog.values() if e.sha256 == "unverified"]
    assert {e.id for e in unverified} == {"limix-16m", "graphpfn-1.3-adapters"}
    for entry in unverified:
        assert "would verify" in entry.unverified_reason
        _place(tmp_path, entry, b"not the upstream file")
        with pytest.raises(WeightsError, match="unverified"):
            resolve(entry, tmp_path)
        resolved = resolve(entry, tmp_path, allow_unverified=True)
        assert resolved.official is False and len(resolved.sha256) == 64


@pytest.mark.parametrize(
    "fields, problem",
    [
        ({"sha256": "unverified"}, "without unverified_reason"),
        ({"sha256": "ab" * 32, "git_blob_sha1": "cd" * 20}, "exactly one"),
        ({}, "exactly one"),
        ({"git_blob_sha1": "XYZ"}, "lower-case hex"),
        ({"sha256_from": "http://example.org/config.json"}, "https"),
    ],
)
def test_a_catalog_entry_names_exactly_one_sound_integrity_field(fields, problem):
    entry = WeightsEntry(id="w", model="m", version="1", url="https://example.org/w.pt", license="MIT", **fields)
    assert any(problem in p for p in entry.problems())


def test_weights_list_says_how_each_file_verifies(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from orchestrator.cli import weights as weights_cli

    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path))
    listing = CliRunner().invoke(weights_cli.app, ["list"], env={"COLUMNS": "400"})
    assert listing.exit_code == 0, listing.output
    current = ""
    rows: dict[str, str] = {}  # id -> its "verified by" cell, the folded lines of a row joined
    for line in listing.output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) != 6 or cells[0] == "id":
            continue
        current = cells[0] or current
        rows[current] = (rows.get(current, "") + " " + cells[4]).strip()
    assert rows["nodepfn-epoch30"] == "sha256 6c2da16cedd2"
    assert rows["tabpfn-v2-classifier"] == "sha256 f65a35685aee"
    assert rows["g2tfm-pearl-random"] == "git blob 64795a38350d"
    assert "UNVERIFIED: no published digest" in rows["limix-16m"] and "would verify" in rows["limix-16m"]
    assert (
        rows["ephris-1.0.0"].startswith("sha256 in https://huggingface.co/") and "config.json" in rows["ephris-1.0.0"]
    )
