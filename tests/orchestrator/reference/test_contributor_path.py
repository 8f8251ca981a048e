"""A contributor's path on a fresh checkout: scaffold a method, run it alone under Lite, and see it ranked among
every shipped reference method, with its coverage stated, on a leaderboard that fits 1,400 pixels in Chromium,
its rows marked and its rank named in the findings and on the page's first screen.

The checkout is a copy of the working tree (what a clone holds), the method the scaffold of
`orchestrator methods new`, unchanged; `python -m orchestrator` runs from the copy, so its services serve the
copy's methods. The run covers the smallest reference datasets but never all of them (at most two, and one fewer
than the reference holds), so the report names the cells it lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.data.registry import dataset_size
from orchestrator.reference import load_reference
from orchestrator.reference.compare import REFERENCE, SUBMITTED
from tests.conftest import HANG_S
from tests.orchestrator.analysis.test_report_browser import (
    CHROMIUM,
    DomSummary,
    _body_attributes,
    chromium,
    first_screen,
)

ROOT = Path(__file__).resolve().parents[3]
TREE = ("contract", "methods", "orchestrator", "datasets", "pyproject.toml")
#: After the page's script: the first leaderboard's row of the contributed method, and the widths laid out.
_PROBE = """<script>
(function(){
  var t=document.querySelector('table[id^=leaderboard-]'), b=document.body, w=t.parentElement;
  var row=Array.from(t.tBodies[0].rows).find(function(r){return r.textContent.indexOf('democi')>=0});
  b.setAttribute('data-row', row ? row.textContent : '');
  b.setAttribute('data-page', document.documentElement.scrollWidth+' '+window.innerWidth);
  b.setAttribute('data-table', w.scrollWidth+' '+w.clientWidth);
})();
</script></body>"""


def _orchestrator(checkout: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=8 * HANG_S,
    )  # fmt: skip
    assert done.returncode == 0, f"orchestrator {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
@pytest.mark.timeout(16 * HANG_S)  # a hang only: the Lite run takes about a minute, the report about one
def test_a_scaffolded_method_run_alone_is_ranked_among_the_reference(mirror, tmp_path):
    _, manifest = load_reference("lite")
    smallest = sorted(manifest.datasets, key=lambda d: dataset_size(d).nodes)
    datasets = smallest[: max(1, min(2, len(smallest) - 1))]
    checkout = tmp_path / "clone"
    checkout.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info")
    for name in TREE:
        source = ROOT / name
        (shutil.copytree(source, checkout / name, ignore=ignore) if source.is_dir() else shutil.copy(source, checkout))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEGROUND_")}
    env.update(NODEGROUND_MIRROR=str(mirror), NODEGROUND_CACHE=str(tmp_path / "cache"))
    _orchestrator(checkout, env, "methods", "new", "democi")
    store, site = tmp_path / "mine.sqlite", tmp_path / "report"
    _orchestrator(
        checkout, env, "run", "--methods", "democi", "--protocol", "lite", "--datasets", ",".join(datasets),
        "--store", str(store),
    )  # fmt: skip
    said = _orchestrator(checkout, env, "report", "--store", str(store), "--reference", "lite", "--out", str(site))

    cells = len(manifest.datasets) * len(manifest.regimes) * len(manifest.splits)
    covered = len(datasets) * len(manifest.regimes)
    assert f"democi: {covered}/{cells} reference cells; missing" in said  # coverage stated
    entries = pd.read_csv(site / "tables" / "entries.csv").set_index("method")["status"]
    assert entries["democi"] == SUBMITTED and set(entries.drop("democi")) == {REFERENCE}
    assert set(entries.index) == {"democi", *manifest.methods}
    board = pd.read_csv(site / "tables" / "leaderboard.csv")
    ranked = set(board["view"].str.removesuffix("-Default"))
    assert {"democi", *manifest.methods} <= ranked  # everyone who competes is rated, the contribution among them
    mine = board[board["view"].str.startswith("democi")]
    assert (mine["imputed_datasets"] == 0).all() and (mine["missing_datasets"] > 0).all()  # an entrant: never imputed

    url = (site / "index.html").resolve().as_uri()
    run = chromium(["--window-size=1400,1000", "--virtual-time-budget=15000", "--dump-dom", url], tmp_path / "p1")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = DomSummary()
    dom.feed(run.stdout)
    for regime, n in board.groupby("regime").size().items():
        assert dom.rows[f"leaderboard-{regime.replace('/', '-')}"] == n
        assert dom.marked[f"leaderboard-{regime.replace('/', '-')}"] == len(mine[mine["regime"] == regime]) > 0
    assert not dom.repeated_ids()
    said = pd.read_csv(site / "tables" / "findings.csv")
    for r in mine.itertuples():  # the contribution's rank, in the findings and on the first screen
        sentence = f"{r.view} ranks {r.rank} of {int((board['regime'] == r.regime).sum())} (Elo {r.elo:.0f}"
        assert (
            said[(said["regime"] == r.regime) & (said["topic"] == "submitted")]["sentence"]
            .str.contains(sentence, regex=False)
            .any()
        ), sentence
        glance = run.stdout[run.stdout.index('id="glance"') : run.stdout.index('id="coverage"')]
        assert sentence in glance
    probe = site / "probe.html"
    probe.write_text((site / "index.html").read_text().replace("</body>", _PROBE))
    run = chromium(["--window-size=1400,1000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                   tmp_path / "p2")  # fmt: skip
    attrs = _body_attributes(run.stdout)
    assert SUBMITTED in attrs["data-row"], attrs
    page, inner = map(int, attrs["data-page"].split())
    table, frame = map(int, attrs["data-table"].split())
    assert page <= inner and table <= frame, "no horizontal scroll at 1,400 pixels"
    artifacts = Path(os.environ.get("NODEGROUND_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "reference-leaderboard.png"
    run = chromium(["--window-size=1400,1400", "--virtual-time-budget=15000", f"--screenshot={shot}", url],
                   tmp_path / "p3")  # fmt: skip
    assert run.returncode == 0 and shot.stat().st_size > 50_000
    first_screen(shot, artifacts / "reference-first-screen.png")


@pytest.mark.slow
@pytest.mark.timeout(16 * HANG_S)  # a hang only: two small Lite runs and a report take a few minutes
def test_with_nothing_set_a_contributors_costs_meet_the_references_on_the_pareto_page(mirror, tmp_path):
    """The documented path with no variable set (`methods new` -> `run --protocol lite` -> `report --reference lite`)
    records what the reference records on the same machine (one thread a service, native kernels), so the reference
    methods' costs stand beside the new method's on the cost pages. The reference here is built on this machine, as
    `make reference` builds the shipped one (its rows and manifest written by the same functions)."""
    from orchestrator.protocols import LITE
    from orchestrator.reference import Manifest, write_reference
    from orchestrator.reference.build import table_rows
    from orchestrator.store import read_trials

    checkout = tmp_path / "clone"
    checkout.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info")
    for name in TREE:
        source = ROOT / name
        (shutil.copytree(source, checkout / name, ignore=ignore) if source.is_dir() else shutil.copy(source, checkout))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEGROUND_")}
    env.update(NODEGROUND_MIRROR=str(mirror), NODEGROUND_CACHE=str(tmp_path / "cache"))
    lite = ("--protocol", "lite", "--datasets", "texas")
    built = tmp_path / "reference.sqlite"
    _orchestrator(checkout, env, "run", "--methods", "mlp,gcn", *lite, "--store", str(built))
    trials = read_trials(built)
    rows = table_rows(trials, set(trials["trial_key"]), LITE)
    hardware = str(rows["hardware"].iloc[0])
    assert hardware.endswith(", 1 thread, native kernels"), hardware  # the thread rule and the kernels, by default
    manifest = Manifest(
        protocol="lite",
        budget=LITE.budget,
        regimes=list(LITE.regimes),
        splits=list(LITE.splits),
        methods=["mlp", "gcn"],
        missing={},
        datasets=["texas"],
        pending={},
        hardware=hardware,
    )
    write_reference(rows, manifest, checkout / "orchestrator" / "reference")

    _orchestrator(checkout, env, "methods", "new", "democi")
    store, site = tmp_path / "mine.sqlite", tmp_path / "report"
    _orchestrator(checkout, env, "run", "--methods", "democi", *lite, "--store", str(store))
    said = _orchestrator(checkout, env, "report", "--store", str(store), "--reference", "lite", "--out", str(site))
    assert "the reference methods' costs are left out" not in said
    points = pd.concat([pd.read_csv(p) for p in site.rglob("pareto_time*.csv")], ignore_index=True)
    shown = points.dropna(subset=["mean_overhead"])["view"].astype(str).str.split("-").str[0]
    assert {"democi", "mlp", "gcn"} <= set(shown), sorted(set(shown))
