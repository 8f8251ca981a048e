"""The flags several commands share, declared once, and the parsers that check what they were given.

A command takes a shared flag by its type (``endpoint: EndpointOpt = []``), or a group of them as one parameter
(``sweep: SweepFlags``, see ``flag_groups``), so names, help and defaults read the same in every command; a parser
turns a flag's text into values or raises UserError (one line, exit 2) before anything starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from contract.address import AddressError, check_host, check_port, split_address
from contract.families import load_families
from orchestrator.cli.errors import UserError
from orchestrator.data.registry import is_available, resolve_name, tasks
from orchestrator.data.splits import ALL_REGIMES, SPLIT_INDICES
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, MAX_BUDGET, MAX_TIME_LIMIT_S, SweepPlan
from orchestrator.protocols import LITE, Protocol, protocol_named
from orchestrator.services.discovery import DiscoveryError, is_dns_target, split_target

F = TypeVar("F", bound=Callable[..., Any])

ALL_DATASETS = "all"  # --datasets all: the whole catalog (the protocol)
LOADABLE_DATASETS = "loadable"  # --datasets loadable: every catalog task this machine can load now (Lite's tier)
ALL_METHODS = "all"  # --methods all: every method of this checkout's families (the protocol's, and a scaffold's)
DEFAULT_REGIMES, DEFAULT_SPLITS, DEFAULT_BUDGET = "10/10/80", "0", 1  # without a --protocol

TIME_LIMIT_HELP = (
    "Time limit of each fit and each predict, in seconds (a stored timeout under a smaller limit is retried)."
)
PROTOCOL_HELP = (
    "A named protocol (paper: both regimes, splits 0-4, budget 201, the catalog; lite: both regimes, split 0, "
    f"budget {LITE.budget}, the datasets the shipped reference holds unless --datasets says otherwise): its "
    "datasets, regimes, splits and budget for each of those flags not given."
)
ENDPOINT_HELP = (
    "Use a running service: METHOD_OR_FAMILY=HOST:PORT, or =dns:///NAME:PORT for every replica behind a DNS name "
    "(repeatable; several addresses give several replicas)."
)
SERVICES_HELP = (
    "Where services come from when no --endpoint names them: auto (containers if running, else local processes), "
    "embedded, docker."
)
HARDWARE_HELP = (
    "The hardware whose records price the plan, as the estimate names it (a CPU model and threads, or a GPU), or a "
    "part of that name only one hardware has (default: the hardware most records ran on)."
)

MethodsOpt = Annotated[
    str,
    typer.Option(help="Comma-separated method names, e.g. mlp,gcn; all = every method of the families in methods/."),
]
ProtocolOpt = Annotated[str | None, typer.Option(help=PROTOCOL_HELP)]
DatasetsOpt = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated dataset names, e.g. synthetic-homophilous,cora; all = the catalog; loadable = "
        "every catalog task this machine can load now (default: the --protocol's)."
    ),
]
RegimesOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Comma-separated label regimes: {', '.join(ALL_REGIMES)} (public = the split the source "
        f"publishes; default: {DEFAULT_REGIMES}, or the --protocol's)."
    ),
]
SplitsOpt = Annotated[
    str | None,
    typer.Option(help=f"Comma-separated split indices (0-4; default: {DEFAULT_SPLITS}, or the --protocol's)."),
]
BudgetOpt = Annotated[
    int | None,
    typer.Option(
        help="Trials per (method, dataset, regime, split): the default config plus budget-1 sampled ones "
        f"(default: {DEFAULT_BUDGET}, or the --protocol's)."
    ),
]
TimeLimitOpt = Annotated[float, typer.Option(help=TIME_LIMIT_HELP)]
EndpointOpt = Annotated[list[str], typer.Option(help=ENDPOINT_HELP)]
ServicesOpt = Annotated[str, typer.Option(help=SERVICES_HELP)]
HardwareOpt = Annotated[str | None, typer.Option(help=HARDWARE_HELP)]


def flag_groups(command: F) -> F:
    """Let ``command`` take a group of flags as one parameter typed by a dataclass of flags (``SweepFlags``): Typer
    sees the dataclass's fields as the command's own flags, in the parameter's place, and the command gets them as
    one value. Typer reuses a flag (an ``Annotated`` alias) but has no groups of them (fastapi/typer#153)."""
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, Any] = {
        p.name: p.annotation for p in signature.parameters.values() if dataclasses.is_dataclass(p.annotation)
    }
    flags: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name not in groups:
            flags.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        hints = typing.get_type_hints(param.annotation, include_extras=True)
        for field in dataclasses.fields(param.annotation):
            default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
            flags.append(
                inspect.Parameter(
                    field.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=hints[field.name],
                    default=inspect.Parameter.empty if default is dataclasses.MISSING else default,
                )
            )

    expanded = signature.replace(parameters=flags)

    @functools.wraps(command)
    def grouped(**given: Any) -> Any:
        bound = expanded.bind(**given)
        bound.apply_defaults()
        values = dict(bound.arguments)
        for name, group in groups.items():
            values[name] = group(**{f.name: values.pop(f.name) for f in dataclasses.fields(group)})
        return command(**values)

    grouped.__signature__ = expanded  # type: ignore[attr-defined]
    grouped.__annotations__ = {p.name: p.annotation for p in flags} | {"return": signature.return_annotation}
    return grouped  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class SweepFlags:
    """The flags that describe a sweep, as `run`, `plan` and `slurm submit` take them."""

    methods: MethodsOpt
    datasets: DatasetsOpt = None
    regimes: RegimesOpt = None
    splits: SplitsOpt = None
    budget: BudgetOpt = None
    protocol: ProtocolOpt = None
    time_limit: TimeLimitOpt = DEFAULT_TIME_LIMIT_S

    def plan(self, shard: str = "0/1") -> SweepPlan:
        """The sweep these flags describe, every value checked (``build_plan``)."""
        return build_plan(
            self.methods, self.datasets, self.regimes, self.splits, self.budget, self.time_limit, shard, self.protocol
        )


def csv_items(value: str, what: str) -> list[str]:
    """A comma-separated flag's items, blanks dropped; UserError when none is left."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UserError(f"--{what} is empty")
    return items


def check_count(flag: str, value: int, high: int) -> int:
    """An integer flag between 1 and ``high``; UserError (one line) otherwise."""
    if not 1 <= value <= high:
        raise UserError(f"--{flag} must be between 1 and {high}, got {value}")
    return value


def check_time_limit(value: float) -> float:
    """A time limit in seconds: finite, positive, at most MAX_TIME_LIMIT_S."""
    if not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT_S):
        raise UserError(f"--time-limit must be a number of seconds in (0, {MAX_TIME_LIMIT_S:.0f}], got {value}")
    return value


def parse_splits(value: str) -> list[int]:
    try:
        splits = [int(v) for v in csv_items(value, "splits")]
    except ValueError:
        raise UserError(f"--splits must be comma-separated integers, got {value!r}") from None
    bad = [s for s in splits if s not in SPLIT_INDICES]
    if bad:
        raise UserError(f"split index {bad[0]} is outside 0..{SPLIT_INDICES[-1]}")
    return splits


def parse_shard(value: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) as (I, N)."""
    index, sep, count = value.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit() or not 0 <= int(index) < int(count):
        raise UserError(f"--shard must look like I/N with 0 <= I < N (e.g. 0/3), got {value!r}")
    return int(index), int(count)


def parse_endpoints(values: list[str]) -> dict[str, list[str]]:
    """``NAME=HOST:PORT`` or ``NAME=dns:///HOST:PORT`` values; a name given several times gets several
    replicas, and a DNS target stands for every address behind it (resolved by the directory).

    NAME must be a method or a family of this checkout (a typo would leave the service unused and start a local one
    instead: refused with the close matches); HOST and PORT follow ``contract.address`` (a port in 1..65535: gRPC
    would take 47400 + 65536 as 47400).
    """
    endpoints: dict[str, list[str]] = {}
    families = load_families()
    known = [*families, *(m for family in families.values() for m in family.methods)]
    for value in values:
        name, sep, address = value.partition("=")
        name, address = name.strip(), address.strip()
        if not sep or not name or not address:
            raise UserError(
                "--endpoint must look like NAME=HOST:PORT or NAME=dns:///HOST:PORT (NAME a method or family), got "
                f"{value!r}"
            )
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"families: {', '.join(families)}"
            raise UserError(f"--endpoint {value!r}: {name!r} is neither a method nor a family of this checkout; {hint}")
        try:
            if is_dns_target(address):
                host, port = split_target(address)
                check_host(host, f"--endpoint {value!r}: host")
                check_port(port, f"--endpoint {value!r}: port")
            else:
                split_address(address, f"--endpoint {value!r}")
        except (AddressError, DiscoveryError) as exc:
            raise UserError(str(exc)) from None
        known_addresses = endpoints.setdefault(name, [])
        if address not in known_addresses:
            known_addresses.append(address)
    return endpoints


def parse_regimes(value: str) -> list[str]:
    """Comma-separated label regimes, each one of ALL_REGIMES."""
    names = csv_items(value, "regimes")
    bad = [r for r in names if r not in ALL_REGIMES]
    if bad:
        raise UserError(f"unknown regime {bad[0]!r}; choose from {', '.join(ALL_REGIMES)}")
    return names


def parse_methods(value: str) -> list[str]:
    """Comma-separated method names; ``all`` is every method the families in ``methods/`` declare, in their order."""
    if value.strip() == ALL_METHODS:
        return [m for family in load_families().values() for m in family.methods]
    return csv_items(value, "methods")


def parse_datasets(value: str) -> list[str]:
    """Comma-separated dataset names or aliases as catalog names; ``all`` is the whole catalog (the protocol),
    ``loadable`` every catalog task this machine can load now."""
    if value.strip() == ALL_DATASETS:
        return [t["name"] for t in tasks()]
    if value.strip() == LOADABLE_DATASETS:
        return loadable_datasets()
    return [resolve_name(d) for d in csv_items(value, "datasets")]


def loadable_datasets() -> list[str]:
    """The catalog tasks this machine can load now (processed in the cache, or in NODEGROUND_MIRROR)."""
    loadable = [t["name"] for t in tasks() if is_available(t)]
    if not loadable:
        raise UserError(
            "no catalog task loads on this machine (none processed in the cache, none in NODEGROUND_MIRROR); name "
            "--datasets to download them"
        )
    return loadable


def protocol_datasets(protocol: Protocol) -> str:
    """A protocol's datasets as a --datasets value: the catalog, or the catalog tasks this machine can load now."""
    return ALL_DATASETS if protocol.datasets == "catalog" else LOADABLE_DATASETS


def default_datasets(protocol: Protocol) -> str:
    """--datasets when a protocol fills it: a Lite run is for comparing with the shipped reference, so it covers the
    datasets the reference holds (a cell the reference lacks ranks against nothing) and says so in one line, with the
    way to ask for more; any other protocol's own datasets."""
    from orchestrator.reference import ReferenceError, read_manifest

    if protocol.name != LITE.name:
        return protocol_datasets(protocol)
    try:
        held = read_manifest(LITE.name).datasets
    except ReferenceError:
        held = []
    if not held:
        return protocol_datasets(protocol)
    typer.echo(
        f"--protocol {LITE.name}: the {len(held)} datasets the shipped reference holds ({', '.join(held)}), to rank "
        f"against it; --datasets {LOADABLE_DATASETS} runs every catalog task this machine can load, --datasets "
        f"{ALL_DATASETS} the whole catalog",
        err=True,
    )
    return ",".join(held)


def build_plan(
    methods: str | None,
    datasets: str | None,
    regimes: str | None,
    splits: str | None,
    budget: int | None,
    time_limit: float,
    shard: str = "0/1",
    protocol: str | None = None,
) -> SweepPlan:
    """The sweep the flags describe, every value checked before any service starts.

    ``methods`` None leaves them to the caller (`submit`: every method the image hosts). A flag not given (None)
    takes the ``protocol``'s value, else the default of a sweep without one; a sweep needs its datasets named.
    """
    try:
        named = protocol_named(protocol) if protocol is not None else None
    except ValueError as exc:
        raise UserError(f"--protocol: {exc}") from None
    if datasets is None:
        if named is None:
            raise UserError("--datasets is required (or --protocol, whose datasets it names)")
        datasets = default_datasets(named)
    budget = budget if budget is not None else named.budget if named else DEFAULT_BUDGET
    check_count("budget", budget, MAX_BUDGET)
    check_time_limit(time_limit)
    return SweepPlan(
        methods=() if methods is None else tuple(parse_methods(methods)),
        datasets=tuple(parse_datasets(datasets)),
        regimes=tuple(parse_regimes(regimes or (",".join(named.regimes) if named else DEFAULT_REGIMES))),
        splits=tuple(parse_splits(splits or (",".join(map(str, named.splits)) if named else DEFAULT_SPLITS))),
        budget=budget,
        time_limit=time_limit,
        shard=parse_shard(shard),
        protocol=named.name if named else None,
    )
