"""A family's cost prior as data: the grammar of its manifest's ``[cost]`` table, read by both sides.

A family declares what a trial's cost grows with beside its search space (``[cost]`` in
``methods/<family>/manifest.toml``, ``[cost.<method>]`` for one method, which replaces the family's part by part).
The orchestrator's estimate (``orchestrator.price``) learns each term's weight from records; a method's service
refuses, before building it, a configuration whose declared bytes exceed its memory budget
(``methods.sdk.require_declared_memory``). One declaration, so that re-measuring a method's memory changes both.

The grammar:

- a **term** multiplies graph sizes (``SIZE_NAMES``: ``nodes``, ``edges``, ``arcs`` = nodes + 2 x edges, the
  messages one propagation sends, ``features``, ``classes``, ``train`` = training nodes) and configuration values:
  a key's number (1 where the configuration has none), ``key=value`` (1 where the configuration says so, else 0) or
  ``key>number`` (1 where its number is larger, else 0: a dropout costs the same at any rate that runs at all),
  joined by ``*``; its weight is a positive number;
- the **parts** (``PRIOR_PARTS``): ``epoch`` (multiply-adds of one epoch), ``once`` (multiply-adds per trial) and
  ``memory`` (bytes at the peak), each a table of term = weight; ``overhead`` (``OVERHEAD_PART``), a list of
  configuration values only, an epoch's fixed cost whatever the graph (the records alone weigh it);
- ``check`` (``CHECK_PART``), what the method's resource check refuses: ``memory``, a list of the ``memory`` part's
  terms it counts (with their weights there), and ``beyond``, a table of terms only the check counts (what the
  peak of a finished fit does not hold: a backward's transient buffers). A method with a check declares one; a
  difference from the prior is written there, and tested (``tests/methods/test_resource_checks.py``).

A family that declares no prior gets ``GENERIC_PRIOR`` (linear in nodes x features and in arcs) and no check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contract.errors import UserError
from contract.families import Family, load_families

SIZE_NAMES = ("nodes", "edges", "arcs", "features", "classes", "train")
#: The sizes a service knows of a graph when its resource check runs: before a fit, so without ``train``.
CHECK_SIZES = ("nodes", "edges", "arcs", "features", "classes")
PRIOR_PARTS = ("epoch", "once", "memory")
OVERHEAD_PART = "overhead"
CHECK_PART = "check"
CHECK_KEYS = ("memory", "beyond")


class PriorError(UserError, ValueError):
    """A family's cost prior that is not well-formed (its manifest's [cost] table)."""


@dataclass(frozen=True)
class Term:
    """One product of graph sizes and configuration values, with its prior weight (multiply-adds or bytes)."""

    factors: tuple[str, ...]
    weight: float

    @property
    def name(self) -> str:
        return "*".join(self.factors)

    @classmethod
    def parse(cls, text: str, weight: object, where: str) -> Term:
        factors = tuple(part.strip() for part in str(text).split("*"))
        if not all(factors) or not all(_factor_form(f) for f in factors):
            raise PriorError(f"{where}: term {text!r} must be names joined by '*' (a name, key=value, or key>number)")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
            raise PriorError(f"{where}: the weight of {text!r} must be a positive number, got {weight!r}")
        return cls(factors, float(weight))

    def size_part(self, size: Mapping[str, float]) -> float:
        return math.prod(size[f] for f in self.factors if f in SIZE_NAMES)

    def config_part(self, config: Mapping[str, Any]) -> float:
        """The configuration's factors: a key's number (1 where it has none); ``key=value`` 1 where the configuration
        says so, else 0; ``key>number`` 1 where its number is larger (a dropout that runs at all), else 0."""
        product = 1.0
        for factor in self.factors:
            if factor in SIZE_NAMES:
                continue
            key, sign, value = _split_factor(factor)
            given = config.get(key)
            if sign == "=":
                product *= float(str(given).lower() == value.lower())
            elif sign == ">":
                product *= float(_number(given) > float(value))
            elif isinstance(given, (int, float)):
                product *= float(given)
        return product

    def value(self, size: Mapping[str, float], config: Mapping[str, Any]) -> float:
        """The term at one graph and configuration: its weight times both parts (bytes, for a memory term)."""
        return self.weight * self.size_part(size) * self.config_part(config)

    def config_keys(self) -> set[str]:
        return {_split_factor(f)[0] for f in self.factors if f not in SIZE_NAMES}


def _split_factor(factor: str) -> tuple[str, str, str]:
    """A term's factor as (key, sign, value): sign "=" or ">" (a comparison), or "" for a plain name."""
    for sign in ("=", ">"):
        key, found, value = factor.partition(sign)
        if found:
            return key.strip(), sign, value.strip()
    return factor, "", ""


def _factor_form(factor: str) -> bool:
    key, sign, value = _split_factor(factor)
    if not key or (sign and not value):
        return False
    if sign == ">":
        try:
            return math.isfinite(float(value))
        except ValueError:
            return False
    return True


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


@dataclass(frozen=True)
class ResourceCheck:
    """What a method's resource check refuses on: some of its prior's memory terms, and terms beyond the prior."""

    counted: tuple[Term, ...]  # the memory part's own terms (their weights are the prior's)
    beyond: tuple[Term, ...]  # what only the check counts

    @property
    def terms(self) -> tuple[Term, ...]:
        return (*self.counted, *self.beyond)

    def bytes(self, size: Mapping[str, float], config: Mapping[str, Any]) -> float:
        """The bytes the check refuses on, at one graph and configuration."""
        return float(sum(t.value(size, config) for t in self.terms))


@dataclass(frozen=True)
class CostPrior:
    """What a method's trial costs grow with: per-epoch work, once-per-trial work and the bytes of its peak, and
    the configuration values an epoch's fixed cost grows with (``overhead``: framework calls per layer or step,
    whatever the graph; the records alone weigh them, as they weigh the trial's and the epoch's constants)."""

    epoch: tuple[Term, ...]
    once: tuple[Term, ...]
    memory: tuple[Term, ...]
    source: str  # where it is declared
    overhead: tuple[Term, ...] = ()  # weight NaN: no prior weight
    check: ResourceCheck | None = None  # what the method's resource check refuses (None: it has none)

    def problems(self, config_keys: Iterable[str]) -> list[str]:
        """Factors that are neither a size nor a key of the method's configuration (empty when none)."""
        keys = set(config_keys)
        checked = self.check.terms if self.check is not None else ()
        return [
            f"{self.source}: {t.name} names {sorted(t.config_keys() - keys)}, neither a size ({', '.join(SIZE_NAMES)}) "
            "nor a configuration key"
            for t in dict.fromkeys((*self.overhead, *self.epoch, *self.once, *self.memory, *checked))
            if t.config_keys() - keys
        ]


GENERIC_PRIOR = CostPrior(
    epoch=(),
    once=(Term(("nodes", "features"), 1.0), Term(("arcs",), 8.0)),
    memory=(Term(("nodes", "features"), 8.0), Term(("arcs",), 40.0)),
    source="the generic prior (no [cost] in the family's manifest)",
)


def cost_prior(method: str, family: Family | None) -> CostPrior:
    """The method's prior: its own ``[cost.<method>]`` part by part over its family's ``[cost]``, else generic."""
    declared = family.cost if family is not None else {}
    if not declared:
        return GENERIC_PRIOR
    assert family is not None
    own = declared.get(method, {})
    where = f"methods/{family.name}/manifest.toml [cost{'.' + method if own else ''}]"
    known = (*PRIOR_PARTS, OVERHEAD_PART, CHECK_PART)
    unknown = [k for k in declared if k not in known and k not in family.methods]
    unknown += [k for k in own if k not in known]
    if unknown:
        raise PriorError(
            f"{where}: unknown part(s) {', '.join(map(str, unknown))}; a prior has {', '.join(known)}, and a "
            f"table per method of the family ({', '.join(family.methods)})"
        )
    parts = {}
    for part in PRIOR_PARTS:
        table = own.get(part, declared.get(part, {}))
        if not isinstance(table, dict):
            raise PriorError(f"{where}: {part} must be a table of term = weight")
        parts[part] = tuple(Term.parse(t, w, where) for t, w in table.items())
    return CostPrior(
        parts["epoch"],
        parts["once"],
        parts["memory"],
        where,
        _overhead(own, declared, where),
        _check(own.get(CHECK_PART, declared.get(CHECK_PART)), parts["memory"], where),
    )


def _overhead(own: Mapping, declared: Mapping, where: str) -> tuple[Term, ...]:
    """The ``overhead`` list: products of configuration values only (a graph size there would be work, not
    overhead), unweighted."""
    names = own.get(OVERHEAD_PART, declared.get(OVERHEAD_PART, []))
    if not isinstance(names, list):
        raise PriorError(f"{where}: {OVERHEAD_PART} must be a list of configuration values (names joined by '*')")
    terms = tuple(Term.parse(name, 1.0, where) for name in names)
    for term in terms:
        if any(f in SIZE_NAMES for f in term.factors):
            raise PriorError(
                f"{where}: {OVERHEAD_PART} term {term.name!r} names a graph size; one that grows with the graph is "
                "work (epoch)"
            )
    return tuple(Term(t.factors, math.nan) for t in terms)


def _check(table: object, memory: tuple[Term, ...], where: str) -> ResourceCheck | None:
    """The ``check`` table: memory terms named as the prior declares them, and the terms beyond the prior."""
    if table is None:
        return None
    if not isinstance(table, dict) or set(table) - set(CHECK_KEYS):
        raise PriorError(f"{where}: {CHECK_PART} must be a table of {' and '.join(CHECK_KEYS)}")
    names, beyond = table.get("memory", []), table.get("beyond", {})
    if not isinstance(names, list) or not isinstance(beyond, dict):
        raise PriorError(
            f"{where}: {CHECK_PART}.memory must be a list of the memory part's terms, {CHECK_PART}.beyond a table of "
            "term = bytes"
        )
    declared = {t.name: t for t in memory}
    counted = []
    for name in names:
        term = declared.get(Term.parse(name, 1.0, where).name)
        if term is None:
            raise PriorError(f"{where}: {CHECK_PART}.memory names {name!r}, which the memory part does not declare")
        counted.append(term)
    check = ResourceCheck(tuple(counted), tuple(Term.parse(t, w, where) for t, w in beyond.items()))
    if not check.terms:
        raise PriorError(f"{where}: {CHECK_PART} counts no term")
    unknown = {f for t in check.terms for f in t.factors if f in SIZE_NAMES and f not in CHECK_SIZES}
    if unknown:
        raise PriorError(
            f"{where}: {CHECK_PART} names {', '.join(sorted(unknown))}; a resource check runs before the split is "
            f"known and sees {', '.join(CHECK_SIZES)}"
        )
    return check


def check_sizes(nodes: int, stored_edges: int, features: int, classes: int) -> dict[str, float]:
    """A graph's sizes as a resource check sees them, from a bundle's counts: its edge index stores every edge in
    both directions, and a propagation adds at most one self-loop per node (``arcs``)."""
    return {
        "nodes": float(nodes),
        "edges": stored_edges / 2,
        "arcs": float(stored_edges + nodes),
        "features": float(features),
        "classes": float(classes),
    }


def prior_problems(family: Family, config_keys: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """What is wrong with each of the family's method priors, one line each: a malformed ``[cost]`` table, or a term
    naming a key the method's configuration lacks (``config_keys``: method -> its keys, where known)."""
    problems = []
    for method in family.methods:
        try:
            prior = cost_prior(method, family)
        except PriorError as exc:
            problems.append(str(exc))
            continue
        if config_keys is not None and method in config_keys:
            problems += prior.problems(config_keys[method])
    return list(dict.fromkeys(problems))


def prior_table(families: Mapping[str, Family] | None = None) -> str:
    """Every method's cost prior as a Markdown table (docs/estimate.md holds it; a test keeps the two equal)."""
    families = load_families() if families is None else families
    lines = [
        "| family | method | overhead per epoch | per epoch | once per trial | peak bytes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for family in families.values():
        for method in family.methods:
            prior = cost_prior(method, family)
            parts = [", ".join(t.name for t in prior.overhead) or "-"] + [
                ", ".join(f"{t.weight:g} {t.name}" for t in terms) or "-"
                for terms in (prior.epoch, prior.once, prior.memory)
            ]
            lines.append(f"| {family.name} | {method} | {' | '.join(parts)} |")
    return "\n".join(lines)
