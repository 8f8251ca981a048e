"""`orchestrator reference`: build (resume, extend) and show the reference records the project ships."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from contract.families import load_families
from contract.hardware import cpu_model, kernel_policy
from contract.settings import THREADS
from orchestrator.cli.calibrate import run_probe
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import TimeLimitOpt, build_plan, protocol_datasets
from orchestrator.cli.progress import cpu_seconds, sweep_with_progress
from orchestrator.cli.services import local_gpus, open_services
from orchestrator.cli.specs import plan_specs
from orchestrator.host import hardware_of
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, Plan, SweepPlan, make_plan
from orchestrator.price import CostModel, learn_cost_model, read_records
from orchestrator.protocols import LITE
from orchestrator.reference import (
    REFERENCE_DIR,
    Manifest,
    ReferenceError,
    load_reference,
    paths,
    read_manifest,
    store_rows,
    write_reference,
)
from orchestrator.reference.build import (
    BuildJournal,
    LoadSampler,
    Sizing,
    build_costs,
    complete_datasets,
    held_keys,
    reference_methods,
    size_up,
    table_rows,
)
from orchestrator.reference.compare import user_hardware
from orchestrator.services.embedded import default_parallel, service_threads
from orchestrator.store import Store, read_trials

app = typer.Typer(help="The reference records the project ships: build (resume, extend) and show them.")
err = Console(stderr=True)
DEFAULT_STORE = Path(".cache/reference/lite.sqlite")


@app.command("build")
@user_errors
def build_command(
    hours: Annotated[
        float, typer.Option(help="Estimated wall hours this build may add (smallest graphs first; one service a core).")
    ] = 4.0,
    store: Annotated[
        Path, typer.Option(help="The build's working store (seeded from the shipped table).")
    ] = DEFAULT_STORE,
    from_stores: Annotated[
        list[Path], typer.Option("--from", help="More records to price with (repeatable), e.g. an earlier sweep here.")
    ] = [],  # noqa: B006
    time_limit: TimeLimitOpt = DEFAULT_TIME_LIMIT_S,
    out: Annotated[
        Path, typer.Option(help="Where the table and manifest go (default: the package's reference/).")
    ] = REFERENCE_DIR,
) -> None:
    """Run the Lite tier of every reference method on the datasets that fit in --hours, and write the shipped table.

    Resumable: the shipped table's rows go back into the store first, so a build only adds what is missing; the
    datasets that do not fit are pending in the manifest with their estimated hours. An interrupted build (Ctrl-C)
    still writes the datasets it completed and its own time, then exits 130.
    """
    if not hours > 0:
        raise UserError(f"--hours must be positive, got {hours:g}")
    started, cpu = time.perf_counter(), cpu_seconds()
    methods, missing = reference_methods(load_families())
    plan = build_plan(",".join(methods), protocol_datasets(LITE), None, None, None, time_limit, protocol=LITE.name)
    computed = make_plan(plan, plan_specs(plan.methods, {}))
    store.parent.mkdir(parents=True, exist_ok=True)
    seeded = _seed(store, out)
    err.print(
        f"reference: {len(methods)} methods, {len(plan.datasets)} datasets, {computed.total:,} trials; "
        f"{len(seeded):,} rows from the shipped table",
        markup=False,
    )
    # The build runs what a user's `run` runs (one one-thread service per core, native kernels); the probe times
    # exactly that, in the build's own store, so the price is this machine's.
    parallel = default_parallel(local_gpus())
    probe = store.with_name("calibration.sqlite")
    run_probe(methods, probe, [], "auto")
    here = _this_machine(local_gpus(), parallel, probe)
    _measure_here(store, here)
    model = learn_cost_model(read_records([store, probe, *from_stores]), here)
    sizing, todo = _size_up(store, computed, model, hours, parallel)
    interrupted = False
    journal, killed, beat = _journal(store, parallel, started, cpu)
    with LoadSampler(on_sample=beat) as load:
        if todo:
            narrowed = SweepPlan(**{**vars(plan), "datasets": tuple(todo)})
            try:
                with open_services(plan.methods, store, [], "embedded", parallel) as found:
                    sweep = found.sweep(narrowed, warmup=True)
                    sweep_with_progress(sweep, stores=[store, probe, *from_stores])  # the ETA's price: the build's
            except KeyboardInterrupt:  # what is complete still ships, and this build's time is counted
                interrupted = True
    trials = read_trials(store)
    complete = complete_datasets(trials, computed)
    keys = {t.key for t in computed.trials([c for c in computed.cells if c.dataset in complete])}
    rows = table_rows(trials, keys, LITE)
    # The earlier builds' time counts while any shipped row is still current; when none is (every method's version
    # moved), the table is built anew. One method's new version leaves the others' rows, and their builds, standing.
    current = any(t.key in seeded for t in computed.trials())
    previous = _previous_builds(out) if current else []
    added = [d for d in complete if d in todo]
    build = {
        **_elapsed(started, cpu),
        "commit": _commit(),
        "datasets_added": added,
        "interrupted": interrupted,
        "hardware": _hardware(rows[rows["dataset"].isin(added)]) if added else _hardware(rows),
        "services": parallel,
        **build_costs(rows[rows["dataset"].isin(added)]),
        **load.summary(),
    }
    manifest = Manifest(
        protocol=LITE.name,
        budget=LITE.budget,
        regimes=list(LITE.regimes),
        splits=list(LITE.splits),
        methods=methods,
        missing=missing,
        datasets=complete,
        pending={d: h for d, h in sizing.hours.items() if d not in complete},
        hardware=_hardware(rows),
        builds=[*previous, *killed, build],
    )
    write_reference(rows, manifest, out)
    journal.close()
    show(out)
    if interrupted:
        raise KeyboardInterrupt  # the one handler: "interrupted: ... rerun the same command to resume", exit 130


def _size_up(store: Path, plan: Plan, model: CostModel, hours: float, parallel: int) -> tuple[Sizing, list[str]]:
    """The datasets priced at what the store lacks of them, and the ones this build runs (printed)."""
    stored = read_trials(store)
    done = complete_datasets(stored, plan)
    sizing = size_up(plan, model, hours, held_keys(stored), parallel)
    todo = [d for d in sizing.run if d not in done]
    left = ", ".join(f"{d} {h:.2f}" for d, h in sizing.remaining.items() if d not in done)
    err.print(
        f"reference: estimated wall hours of what each dataset lacks: {left or 'none'}; "
        f"this build runs {', '.join(todo) or 'nothing new'}",
        markup=False,
    )
    return sizing, todo


def _journal(
    store: Path, parallel: int, started: float, cpu: float
) -> tuple[BuildJournal, list[dict[str, Any]], Callable[[dict[str, float]], None]]:
    """This build's journal, the builds killed before it on the store (said, and shipped in the manifest), and the
    load sampler's callback that rewrites this build's line."""
    commit = _commit()
    journal = BuildJournal(
        store, {"started": datetime.now(UTC).isoformat(timespec="seconds"), "commit": commit, "services": parallel}
    )
    killed = journal.orphans()
    if killed:
        err.print(
            f"reference: {len(killed)} earlier build(s) on this store ended without a manifest line (killed); "
            f"their {sum(b['wall_s'] for b in killed) / 3600:.2f} h go into the manifest",
            markup=False,
        )

    def beat(load: dict[str, float]) -> None:  # every 30 s: the commit is read once, not by a git call a beat
        journal.beat(**_elapsed(started, cpu), commit=commit, **load)

    return journal, killed, beat


def _elapsed(started: float, cpu: float) -> dict[str, Any]:
    """A build's line so far: when, and its wall and CPU seconds since ``started``/``cpu``."""
    return {
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(cpu_seconds() - cpu, 1),
    }


def _this_machine(gpus: int, parallel: int, probe: Path) -> str | None:
    """The hardware line this build's services write (``hardware_of``): on a CPU, read here (the CPU model, the
    services' threads, the kernel policy), never from a store that may hold another machine's records; with a GPU,
    the line most of the probe's records name (the GPU's name is its service's)."""
    if gpus:
        return user_hardware(read_records([probe]))
    threads = service_threads(parallel) or int(THREADS.read() or 1)
    return hardware_of(json.dumps({"cpu_model": cpu_model(), "compute_threads": threads, "kernels": kernel_policy()}))


def _measure_here(store: Path, here: str | None) -> None:
    """A reference's costs are one machine's: rows measured on other hardware (another CPU, threads or kernels) leave
    the working store for its superseded table, so the sweep runs them again here."""
    trials = read_trials(store)
    if here is None or trials.empty:
        return
    lines = trials["host_json"].map(hardware_of)
    elsewhere = lines != here
    if elsewhere.any():
        with Store(store) as target:
            moved = target.supersede(trials.loc[elsewhere, "trial_key"])
        seen = ", ".join(sorted(set(lines[elsewhere])))
        err.print(f"reference: {moved:,} rows measured on {seen} run again on {here}", markup=False)


def _seed(store: Path, root: Path) -> set[str]:
    """Open (creating) the working store and write the shipped table's rows it lacks; the keys of all of them.

    A first build has no shipped table: the store is still created, since the estimate and the datasets' completeness
    are read from it before the sweep writes a row.
    """
    try:
        frame, _ = load_reference(LITE.name, root)
    except ReferenceError:
        frame = None
    with Store(store) as target:
        if frame is None:
            return set()
        held = target.done_keys()
        target.write_rows([r for r in store_rows(frame) if r["trial_key"] not in held])
    return set(frame["trial_key"])


def _previous_builds(root: Path) -> list[dict]:
    try:
        return read_manifest(LITE.name, root).builds
    except ReferenceError:
        return []


def build_lines(manifest: Manifest) -> str:
    """What the table took to build: every build's own wall time in all, and the services' CPU and wall hours and the
    machine's load during each build that recorded them."""
    builds = manifest.builds
    head = f"built in {len(builds)} build(s), {manifest.wall_s / 3600:.2f} h of wall time in all"
    lines = [head]
    for build in builds:
        added = ", ".join(build.get("datasets_added", [])) or "nothing new"
        if build.get("killed"):
            added += " (killed; its time to its last record)"
        elif build.get("interrupted"):
            added += " (interrupted)"
        if build.get("reconstructed"):
            added += " (reconstructed from the line it printed)"
        parts = [f"{build.get('finished', '?')[:16]}: {added}", f"{build.get('wall_s', 0) / 3600:.2f} h"]
        if "service_cpu_h" in build:
            parts.append(
                f"{build.get('services', '?')} service(s) side by side, {build['service_cpu_h']:.2f} service CPU-hours "
                f"({build['service_wall_h']:.2f} wall-hours), load {build.get('load_mean', '?')} on "
                f"{build.get('cores', '?')} cores"
            )
        parts.append(f"at {str(build.get('commit', '?'))[:12]}")
        lines.append("  " + "; ".join(parts))
    return "\n".join(lines)


def _hardware(rows) -> str:
    lines = rows["hardware"].value_counts()
    return str(lines.index[0]) if len(lines) else "none yet"


def _commit() -> str:
    """The code version that built the table: the checkout's commit, marked when the tree has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return f"{head}{'+changes' if dirty else ''}" if head else "unknown"


@app.command("show")
@user_errors
def show_command(
    out: Annotated[
        Path, typer.Option(help="Where the table and manifest are (default: the package's).")
    ] = REFERENCE_DIR,
) -> None:
    """What the shipped reference holds: methods, datasets, what is missing or pending, hardware, time, size."""
    show(out)


def show(root: Path) -> None:
    try:
        frame, manifest = load_reference(LITE.name, root)
    except ReferenceError as exc:
        raise UserError(str(exc)) from None
    table, _ = paths(LITE.name, root)
    cells = frame.groupby(["method", "dataset", "regime", "split"]).ngroups
    typer.echo(
        f"reference {manifest.protocol} (budget {manifest.budget}, regimes {', '.join(manifest.regimes)}, split "
        f"{', '.join(map(str, manifest.splits))}): {manifest.rows:,} trials in {cells:,} cells of "
        f"{len(manifest.methods)} methods on {len(manifest.datasets)} datasets; {table} "
        f"{table.stat().st_size / 2**20:.2f} MiB, sha256 {manifest.sha256[:12]}"
    )
    typer.echo(f"datasets: {', '.join(manifest.datasets) or 'none'}")
    typer.echo(f"hardware: {manifest.hardware}")
    typer.echo(build_lines(manifest))
    typer.echo(
        "costs: the services' CPU seconds on a CPU (an idle machine's wall time for a one-thread service, whatever "
        "else ran), their wall seconds beside them in the table"
    )
    for method, why in manifest.missing.items():
        typer.echo(f"missing: {method}: {why}")
    if manifest.pending:
        pending = ", ".join(f"{d} (~{h:.1f} h)" for d, h in manifest.pending.items())
        typer.echo(f"pending (`make reference` extends the table): {pending}")
