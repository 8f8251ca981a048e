"""The catalog: well-formed tasks with the counts and size range its README states (datasets/README.md, "Scope and
counts"), the one place that names them: a task added there and here, nowhere else."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.registry import resolve_name, tasks, validate_catalog

README = Path(__file__).resolve().parents[3] / "datasets" / "README.md"


class Stated(NamedTuple):
    tasks: int
    topologies: int
    domains: dict[str, int]
    nodes: tuple[int, int]


def stated() -> Stated:
    """The counts datasets/README.md states: tasks, topologies, tasks per domain, the node range."""
    text = " ".join(README.read_text().split())
    counts = re.search(r"- (\d+) tasks over (\d+) graph topologies", text)
    domains = re.search(r"- Domains: (.*?)\. -", text)
    nodes = re.search(r"- ([\d,]+) nodes \(.*?\) to ([\d,]+) nodes", text)
    assert counts and domains and nodes, "datasets/README.md states the catalog's counts under 'Scope and counts'"
    per_domain = {name: int(n) for name, n in (part.rsplit(" ", 1) for part in domains[1].split(", "))}
    low, high = (int(n.replace(",", "")) for n in nodes.groups())
    return Stated(int(counts[1]), int(counts[2]), per_domain, (low, high))


def test_catalog_is_well_formed():
    assert validate_catalog(list(tasks())) == []


def test_the_tasks_domains_and_size_range_are_those_the_readme_states():
    all_tasks, counts = tasks(), stated()
    assert len(all_tasks) == len({t["name"] for t in all_tasks}) == counts.tasks
    assert Counter(t["domain"] for t in all_tasks) == counts.domains
    nodes = [t["nodes"] for t in all_tasks]
    assert (min(nodes), max(nodes)) == counts.nodes
    assert {t["source"] for t in all_tasks} == {"pyg", "hf-tag", "heterophilous", "ogb"}


def test_the_topologies_are_those_the_readme_states_cora_pubmed_wikics_twice():
    twins = {t["name"]: t["same_topology_as"] for t in tasks() if "same_topology_as" in t}
    assert twins == {"cora-tag": "cora", "pubmed-tag": "pubmed", "wikics-tag": "wikics"}
    assert len({t.get("same_topology_as", t["name"]) for t in tasks()}) == stated().topologies


def test_aliases_resolve():
    assert resolve_name("Cora") == "cora"
    assert resolve_name("chameleon_filtered") == "chameleon-filtered"
    assert resolve_name("ARXIV") == "ogbn-arxiv"


def _manifest(mirror) -> dict[str, str]:
    """url -> sha256 of every file the offline mirror holds (the mirror grows; nothing here pins its size)."""
    return {row["url"]: row["sha256"] for row in csv.DictReader((mirror / "MANIFEST.tsv").open(), delimiter="\t")}


def test_every_mirror_file_carries_its_real_sha256(mirror):
    manifest = _manifest(mirror)
    catalog_files = {f["url"]: f["sha256"] for t in tasks() for f in t["files"]}
    in_mirror = {u for u in catalog_files if u in manifest}
    assert in_mirror, "no catalog file is in the mirror"
    for url in in_mirror:  # a mirrored file's hash is known, so the catalog pins it
        assert catalog_files[url] == manifest[url], url
    for url, digest in catalog_files.items():
        assert digest == "unverified" or re.fullmatch(r"[0-9a-f]{64}", digest), url


def test_datasets_list_shows_the_catalogs_count_and_domain_counts(cache):
    result = CliRunner().invoke(app, ["datasets", "list"])
    assert result.exit_code == 0, result.output
    counts = stated()
    assert f"{counts.tasks} tasks" in result.output
    assert ", ".join(f"{d} {n}" for d, n in counts.domains.items()) in result.output
    low, high = counts.nodes
    assert f"nodes {low:,} to {high:,}" in result.output
    names = {t["name"] for t in tasks()}
    shown = {line.split("│")[1].strip() for line in result.output.splitlines() if line.startswith("│")}
    assert shown == names


def _local_column(output: str) -> dict[str, str]:
    rows = [line.split("│") for line in output.splitlines() if line.startswith("│")]
    return {cells[1].strip(): cells[-2].strip() for cells in rows}


def test_datasets_list_counts_mirror_files_as_local(mirror):
    """A task whose every upstream file is in the mirror loads offline, so it is listed as local."""
    manifest = _manifest(mirror)
    expected = {t["name"] for t in tasks() if t["files"] and all(f["url"] in manifest for f in t["files"])}
    assert {"cora", "tolokers"} <= expected  # the mirror's first files, there since it began
    result = CliRunner().invoke(app, ["datasets", "list"])
    assert result.exit_code == 0, result.output
    local = _local_column(result.output)
    assert {name for name, flag in local.items() if flag == "yes"} == expected
    assert f"available locally: {len(expected)}" in result.output


def test_datasets_list_without_mirror_or_cache_has_nothing_local(cache):
    result = CliRunner().invoke(app, ["datasets", "list"])
    assert result.exit_code == 0, result.output
    assert set(_local_column(result.output).values()) == {"no"}
