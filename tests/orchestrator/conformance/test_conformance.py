"""The conformance check against in-process services: an honest one passes, each broken one is caught."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.cli.validate import is_endpoint, parse_env
from orchestrator.conformance import FAIL, REFUSED, Options, run_checks
from orchestrator.conformance.checks import CHECK_EPOCHS
from orchestrator.conformance.graphs import make_case
from orchestrator.conformance.guard import GuardedClient, LabelLeak
from tests.conftest import HANG_S
from tests.orchestrator.conformance.fixtures import (
    Centroid,
    CountsEpochs,
    CrashesOnIsolated,
    DropsLastRow,
    HangsPastDeadline,
    NotSumming,
    RefusesLarge,
    serve,
)

# A short fit deadline keeps the deadline check quick. The grace is HANG_S where the service answers (an honest one
# waits for none of it, and no load can make it late), and short only where the service hangs for ever: then any grace
# catches it, and a short one keeps the test quick.
FAST = Options(call_timeout=HANG_S, deadline=0.3, grace=HANG_S, health_timeout=HANG_S)
HANGING = Options(call_timeout=HANG_S, deadline=0.3, grace=10.0, health_timeout=HANG_S)
# The same through `orchestrator validate`'s flags
CLI = ["--call-timeout", f"{HANG_S:g}", "--deadline", "0.3", "--grace", f"{HANG_S:g}"]


def _failures(results):
    return {r.name: r.detail for r in results if r.status == FAIL}


def test_honest_service_passes_every_check():
    with serve(Centroid) as endpoint:
        results = run_checks(endpoint, FAST)
    assert not _failures(results), _failures(results)
    names = " ".join(r.name for r in results)
    for item in (
        "health",
        "describe",
        "upload",
        "binary",
        "many-classes",
        "isolated-nodes",
        "large",
        "release",
        "malformed",
        "test label",
        "deadline",
    ):
        assert item in names


def test_checks_train_briefly_but_the_deadline_check_trains_the_defaults():
    CountsEpochs.given.clear()
    with serve(CountsEpochs) as endpoint:
        results = run_checks(endpoint, FAST)
    assert not _failures(results), _failures(results)
    *checks, deadline = CountsEpochs.given
    assert checks and set(checks) == {CHECK_EPOCHS}
    assert deadline == 500


def test_rows_not_summing_to_one_are_caught():
    with serve(NotSumming) as endpoint:
        failed = _failures(run_checks(endpoint, FAST))
    assert any("do not sum to one" in d for d in failed.values()), failed
    assert "fit/predict binary [centroid]" in failed


def test_wrong_row_count_is_caught():
    with serve(Centroid, DropsLastRow) as endpoint:
        failed = _failures(run_checks(endpoint, FAST))
    assert (
        "wrong row count: predict returned 79 rows for a graph of 80 nodes" in failed["fit/predict binary [centroid]"]
    )


def test_hang_past_the_deadline_is_caught():
    with serve(HangsPastDeadline) as endpoint:
        failed = _failures(run_checks(endpoint, HANGING))
    assert list(failed) == ["deadline honoured [centroid]"], failed
    assert "hung past its deadline" in failed["deadline honoured [centroid]"]


def test_crash_on_isolated_nodes_is_caught():
    with serve(CrashesOnIsolated) as endpoint:
        failed = _failures(run_checks(endpoint, FAST))
    detail = failed["fit/predict isolated-nodes [centroid]"]
    assert "isolated" in detail and "INTERNAL" in detail and "ZeroDivisionError" in detail
    assert "fit/predict binary [centroid]" not in failed


def test_a_graph_refused_by_the_memory_estimate_is_a_refused_check_not_a_failure():
    runner = CliRunner()
    with serve(RefusesLarge) as endpoint:
        results = {r.name: r for r in run_checks(endpoint, FAST)}
        cli = runner.invoke(app, ["validate", endpoint, *CLI])
    refused = {name: r.detail for name, r in results.items() if r.status == REFUSED}
    assert set(refused) == {"fit/predict large [centroid]", "deadline honoured [centroid]"}, refused
    assert all("RESOURCE_EXHAUSTED" in d and "9.00 GiB" in d for d in refused.values()), refused
    assert not _failures(results.values())
    assert cli.exit_code == 0, cli.output
    assert "2 refused by the method's memory estimate" in cli.output and "no check failed" in cli.output


def test_guard_refuses_a_graph_that_shows_test_labels():
    case = make_case("leak", "leak", 30, 3, 4)
    client = GuardedClient("127.0.0.1:1")
    client.note_graph(case.bundle)
    client.check_fit(case.bundle.graph_hash, case.train, case.val)  # the honest bundle is fine
    leaky = make_case("leak", "leak", 30, 3, 4)
    leaky.bundle.labels[case.test[0]] = case.labels[case.test[0]]
    client.note_graph(leaky.bundle)
    with pytest.raises(LabelLeak, match="outside train ∪ val"):
        client.check_fit(leaky.bundle.graph_hash, case.train, case.val)
    client.close()


def test_cases_hide_every_label_outside_train_and_val():
    case = make_case("c", "c", 50, 4, 3, isolated=5)
    visible = np.flatnonzero(case.bundle.labels >= 0)
    assert set(visible) == set(case.train) | set(case.val)
    src, dst = case.bundle.edge_index
    assert set(range(45, 50)).isdisjoint(set(src[src != dst]))  # isolated: only their self-loop


def test_validate_cli_exit_codes():
    runner = CliRunner()
    with serve(Centroid) as endpoint:
        ok = runner.invoke(app, ["validate", endpoint, *CLI])
    assert ok.exit_code == 0, ok.output
    assert "all" in ok.output and "checks passed" in ok.output
    with serve(NotSumming) as endpoint:
        bad = runner.invoke(app, ["validate", endpoint, *CLI])
    assert bad.exit_code == 1
    assert "FAIL" in bad.output and "checks failed" in bad.output


@pytest.mark.parametrize(
    "target, endpoint",
    [
        ("127.0.0.1:50051", True),
        ("localhost:9", True),
        ("[::1]:50051", True),
        ("unix:/tmp/x.sock", True),
        ("nodeground/demo", False),
        ("nodeground/demo:latest", False),
        ("registry:5000/x/y", False),
        ("demo", False),
    ],
)
def test_endpoint_or_image(target, endpoint):
    assert is_endpoint(target) is endpoint


def test_validate_env_pairs_are_parsed_and_malformed_ones_refused():
    assert parse_env(["NODEGROUND_RANDOM_INIT_WEIGHTS=1", 'ARCH={"a": 1}', "EMPTY="]) == {
        "NODEGROUND_RANDOM_INIT_WEIGHTS": "1",
        "ARCH": '{"a": 1}',
        "EMPTY": "",
    }
    result = CliRunner().invoke(app, ["validate", "nodeground/demo", "--env", "NO_EQUALS_SIGN"])
    assert result.exit_code == 2
    assert "--env takes KEY=VALUE" in result.output and "Traceback" not in result.output
