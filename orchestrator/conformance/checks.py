"""The service contract, checked from outside against any endpoint.

``run_checks(endpoint)`` talks to a running service (an embedded process, a
sandboxed container, anything serving ``nodeground.v1.MethodService``) and
returns one ``CheckResult`` per contract item:

- health answers SERVING;
- Describe is complete (names, dated versions, kinds, capabilities) and every
  search space parses, with the default config and sampled configs valid in it;
- an upload of a graph already held is skipped (HasGraph, ``already_held``);
- fit + predict on a binary graph, a graph with many classes, a graph with
  isolated nodes and a graph larger than one 4 MiB message return an N x C
  matrix of finite probabilities whose rows sum to one;
- release frees the model (predict on it is NOT_FOUND afterwards);
- malformed input is answered with INVALID_ARGUMENT (NOT_FOUND for a graph not
  held or an unknown handle; FAILED_PRECONDITION is kept for a service that is
  not ready) and the service lives on;
- no label outside train ∪ val was ever sent (``guard.GuardedClient``);
- a fit given a time limit answers (OK or DEADLINE_EXCEEDED) within the limit
  plus a grace period.

A fit the method refuses with RESOURCE_EXHAUSTED (its memory estimate says the
graph cannot fit in what the service has) is a ``refused`` check, not a failure:
refusing is the contract for what does not fit. Each failure says what was
wrong in one line.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.descriptions import KIND_NAMES
from contract.space import (
    ConfigError,
    capped_epochs,
    config_from_proto,
    config_to_proto,
    param_from_proto,
    validate_config,
)
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.wire import CHANNEL_OPTIONS, encode
from orchestrator.conformance.graphs import GraphCase, make_case, standard_cases
from orchestrator.conformance.guard import GuardedClient, LabelLeak
from orchestrator.sampling import config_sequence

PASS, FAIL, SKIP, REFUSED = "pass", "fail", "skip", "refused"
ROW_SUM_TOLERANCE = 1e-3
# The checks test the contract, not the model: a fit trains at most this many epochs, enough for
# the training loop's selection and restore (GCNII's default 64 layers x 1,500 epochs took 5 min
# of a 2-core run, NAGphormer's 512-wide tokens 1.3 s of CPU per epoch on 320 nodes), except the
# deadline check's, which needs a fit long enough to be cut short.
CHECK_EPOCHS = 5
_DATED = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass
class CheckResult:
    name: str
    status: str
    detail: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status != FAIL


@dataclass
class Options:
    call_timeout: float = 120.0  # gRPC deadline of every fit/predict without a time limit
    deadline: float = 1.0  # the time limit given to the deadline check's fit
    grace: float = 10.0  # how long past that limit the answer may take
    health_timeout: float = 60.0
    methods: tuple[str, ...] = ()  # only these (default: every method described)


class CheckFailed(Exception):
    """One contract item does not hold; the message says how."""


@dataclass
class Conformance:
    endpoint: str
    options: Options = field(default_factory=Options)
    results: list[CheckResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = GuardedClient(self.endpoint)
        self.channel = grpc.insecure_channel(
            self.endpoint,
            options=CHANNEL_OPTIONS,
        )
        self.stub = pb_grpc.MethodServiceStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.describe_reply: pb.DescribeResponse | None = None
        self.dead = False

    def close(self) -> None:
        self.client.close()
        self.channel.close()

    # ---- running ------------------------------------------------------------

    def check(self, name: str, fn: Callable[[], str | None]) -> CheckResult:
        if self.dead:
            result = CheckResult(name, SKIP, "the service no longer answers")
            self.results.append(result)
            return result
        start = time.perf_counter()
        try:
            detail = fn() or ""
            status = SKIP if detail.startswith("skipped:") else REFUSED if detail.startswith("refused:") else PASS
        except CheckFailed as exc:
            status, detail = FAIL, str(exc)
        except LabelLeak as exc:
            status, detail = FAIL, f"test labels would reach the service: {exc}"
        except grpc.RpcError as exc:
            status, detail = FAIL, f"unexpected {exc.code().name}: {exc.details()}"
        except Exception as exc:  # a check must report, never crash the run
            status, detail = FAIL, f"{type(exc).__name__}: {exc}"
        result = CheckResult(name, status, detail, time.perf_counter() - start)
        self.results.append(result)
        if status == FAIL and not self._alive():
            self.dead = True
            result.detail += " — and the service stopped answering (crashed?)"
        return result

    def _alive(self) -> bool:
        try:
            reply = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5.0)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            return False

    def run(self) -> list[CheckResult]:
        self.check("health answers", self.check_health)
        self.check("describe complete, search spaces parse", self.check_describe)
        methods = self._methods()
        cases = standard_cases(*self._limits(methods))
        self.check("upload of a held graph is skipped", lambda: self.check_upload(cases[0]))
        for method in methods:
            for case in cases:
                self.check(f"fit/predict {case.name} [{method.name}]", partial(self.check_fit_predict, method, case))
            self.check(f"release frees the model [{method.name}]", partial(self.check_release, method, cases[0]))
            self.check(f"malformed input is refused [{method.name}]", partial(self.check_malformed, method, cases[2]))
        self.check("no test label reaches the service", self.check_labels)
        for method in methods:
            self.check(f"deadline honoured [{method.name}]", partial(self.check_deadline, method, cases[-1]))
        return self.results

    # ---- checks -------------------------------------------------------------

    def check_health(self) -> str:
        deadline = time.monotonic() + self.options.health_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                reply = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return "SERVING"
                last = f"status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
            time.sleep(0.2)
        self.dead = True
        raise CheckFailed(
            f"grpc.health.v1 Check did not answer SERVING within {self.options.health_timeout:.0f} s ({last})"
        )

    def check_describe(self) -> str:
        reply = self.stub.Describe(pb.DescribeRequest(), timeout=30.0)
        self.describe_reply = reply
        problems = []
        if not reply.methods:
            raise CheckFailed("Describe lists no methods")
        if not reply.family:
            problems.append("the response has no family")
        if not reply.device:
            problems.append("the response has no device")
        names = [m.name for m in reply.methods]
        if len(set(names)) != len(names):
            problems.append(f"method names repeat: {names}")
        for info in reply.methods:
            where = f"method {info.name or '<unnamed>'}"
            if not info.name:
                problems.append("a method has no name")
            if not _DATED.match(info.version):
                problems.append(f"{where}: version {info.version!r} is not dated (YYYY-MM-DD...)")
            if info.family != reply.family:
                problems.append(f"{where}: family {info.family!r} differs from the service's {reply.family!r}")
            if info.kind not in KIND_NAMES:
                problems.append(f"{where}: kind is unspecified (supervised or gfm)")
            caps = info.capabilities
            if not (caps.supports_binary or caps.supports_multiclass):
                problems.append(f"{where}: supports neither binary nor multiclass tasks")
            try:
                space = tuple(param_from_proto(p) for p in info.search_space)
                defaults = config_from_proto(info.default_config)
                validate_config(defaults, defaults, space)
                for config in config_sequence(defaults, space, f"conformance|{info.name}", 8):
                    validate_config(config, defaults, space)
            except ConfigError as exc:
                problems.append(f"{where}: search space or default config does not parse: {exc}")
        if problems:
            raise CheckFailed("; ".join(problems))
        return f"{len(names)} method(s): {', '.join(names)} (family {reply.family}, device {reply.device})"

    def _methods(self) -> list[pb.MethodInfo]:
        if self.describe_reply is None:
            return []
        methods = list(self.describe_reply.methods)
        if self.options.methods:
            methods = [m for m in methods if m.name in self.options.methods]
        return methods

    @staticmethod
    def _limits(methods: list[pb.MethodInfo]) -> tuple[int, int]:
        classes = [m.capabilities.max_classes for m in methods if m.capabilities.max_classes]
        features = [m.capabilities.max_features for m in methods if m.capabilities.max_features]
        return (min(classes) if classes else 0, min(features) if features else 0)

    def check_upload(self, case: GraphCase) -> str:
        if self.stub.HasGraph(pb.HasGraphRequest(graph_hash="0" * 64), timeout=30.0).held:
            raise CheckFailed("HasGraph says a graph that was never uploaded is held")
        first = self.client.ensure_graph(case.bundle)
        if (
            first.value
            and not self.stub.HasGraph(pb.HasGraphRequest(graph_hash=case.bundle.graph_hash), timeout=30.0).held
        ):
            raise CheckFailed("HasGraph does not report a graph just uploaded")
        again = self.stub.UploadGraph(encode(case.bundle), timeout=60.0)
        if not again.already_held:
            raise CheckFailed("a second UploadGraph of the same hash was not skipped (already_held=false)")
        if again.graph_hash != case.bundle.graph_hash:
            raise CheckFailed(f"UploadGraph answered hash {again.graph_hash!r}, expected {case.bundle.graph_hash}")
        if self.client.ensure_graph(case.bundle).value:
            raise CheckFailed("the client re-uploaded a held graph (HasGraph said not held)")
        return "HasGraph + already_held"

    def _capable(self, method: pb.MethodInfo, case: GraphCase) -> str | None:
        caps = method.capabilities
        binary = case.num_classes == 2
        if binary and not caps.supports_binary:
            return "skipped: the method does not support binary tasks"
        if not binary and not caps.supports_multiclass:
            return "skipped: the method does not support multiclass tasks"
        if caps.max_nodes and case.num_nodes > caps.max_nodes:
            return f"skipped: the method supports at most {caps.max_nodes} nodes"
        if caps.needs_gpu and self.describe_reply is not None and not self.describe_reply.device.startswith("cuda"):
            return "skipped: the method needs a GPU and the service has none"
        return None

    def _fit(
        self,
        method: pb.MethodInfo,
        case: GraphCase,
        time_limit: float = 0.0,
        timeout: float | None = None,
        config: dict | None = None,
    ) -> pb.FitResponse:
        """One Fit; ``config`` None trains the defaults for at most ``CHECK_EPOCHS``, ``{}`` the full defaults."""
        self.client.ensure_graph(case.bundle, timeout=self.options.call_timeout)
        self.client.check_fit(case.bundle.graph_hash, case.train, case.val)
        request = pb.FitRequest(
            method=method.name,
            graph_hash=case.bundle.graph_hash,
            train_nodes=case.train.astype(np.int32).tolist(),
            val_nodes=case.val.astype(np.int32).tolist(),
            config=config_to_proto(self._short(method) if config is None else config),
            seed=0,
            time_limit_seconds=time_limit,
        )
        return self.stub.Fit(request, timeout=timeout or self.options.call_timeout)

    @staticmethod
    def _short(method: pb.MethodInfo) -> dict:
        return capped_epochs(config_from_proto(method.default_config), CHECK_EPOCHS)

    def _predict(self, handle: str, case: GraphCase) -> np.ndarray:
        return read_probabilities(
            self.stub.Predict(pb.PredictRequest(model_handle=handle), timeout=self.options.call_timeout), case
        )

    def check_fit_predict(self, method: pb.MethodInfo, case: GraphCase) -> str:
        reason = self._capable(method, case)
        if reason:
            return reason
        try:
            fit = self._fit(method, case)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return refusal(exc)
            raise CheckFailed(
                f"fit on the {case.name} graph ({case.description}) failed: {exc.code().name}: {exc.details()}"
            ) from None
        try:
            try:
                probs = self._predict(fit.model_handle, case)
            except grpc.RpcError as exc:
                raise CheckFailed(
                    f"predict on the {case.name} graph ({case.description}) failed: {exc.code().name}: {exc.details()}"
                ) from None
        finally:
            _quiet_release(self.stub, fit.model_handle)
        problem = probability_problem(probs, case)
        if problem:
            raise CheckFailed(f"{case.name} graph ({case.description}): {problem}")
        accuracy = float((probs[case.test].argmax(axis=1) == case.labels[case.test]).mean())
        return f"{probs.shape[0]} x {probs.shape[1]}, test accuracy {accuracy:.2f}, fit {fit.stats.seconds:.2f} s"

    def check_release(self, method: pb.MethodInfo, case: GraphCase) -> str:
        reason = self._capable(method, case)
        if reason:
            return reason
        fit = self._fit(method, case)
        if not self.stub.Release(pb.ReleaseRequest(model_handle=fit.model_handle), timeout=30.0).released:
            raise CheckFailed("Release of a fitted model answered released=false")
        try:
            self._predict(fit.model_handle, case)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise CheckFailed(
                    f"predict on a released model answered {exc.code().name}, expected NOT_FOUND"
                ) from None
        else:
            raise CheckFailed("predict on a released model still answered: the model was not freed")
        if self.stub.Release(pb.ReleaseRequest(model_handle=fit.model_handle), timeout=30.0).released:
            raise CheckFailed("a second Release of the same handle answered released=true")
        return "released, then NOT_FOUND"

    def check_malformed(self, method: pb.MethodInfo, case: GraphCase) -> str:
        if self._capable(method, case):
            return self._capable(method, case) or ""
        self.client.ensure_graph(case.bundle)
        n = case.num_nodes
        hidden = case.test[:2]
        good = dict(
            method=method.name,
            graph_hash=case.bundle.graph_hash,
            train_nodes=case.train.tolist(),
            val_nodes=case.val.tolist(),
            seed=0,
        )
        fits: list[tuple[str, dict, grpc.StatusCode]] = [
            ("unknown method", {**good, "method": method.name + "-no-such-method"}, grpc.StatusCode.INVALID_ARGUMENT),
            (
                "train node id out of range",
                {**good, "train_nodes": [*good["train_nodes"], n + 7]},
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
            ("negative node id", {**good, "val_nodes": [-3, *good["val_nodes"]]}, grpc.StatusCode.INVALID_ARGUMENT),
            ("empty train set", {**good, "train_nodes": []}, grpc.StatusCode.INVALID_ARGUMENT),
            (
                "train node whose label is hidden",
                {**good, "train_nodes": [*good["train_nodes"], *hidden.tolist()]},
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
            (
                "unknown config key",
                {**good, "config": {"no_such_key_xyz": pb.Value(int_value=1)}},
                grpc.StatusCode.INVALID_ARGUMENT,
            ),
            ("graph not held", {**good, "graph_hash": "f" * 64}, grpc.StatusCode.NOT_FOUND),
        ]
        defaults = config_from_proto(method.default_config)
        if defaults:
            key, value = next(iter(defaults.items()))
            wrong = pb.Value(string_value="not-a-number") if not isinstance(value, str) else pb.Value(float_value=0.5)
            fits.append(
                (f"config {key} of the wrong type", {**good, "config": {key: wrong}}, grpc.StatusCode.INVALID_ARGUMENT)
            )

        def fit(fields: dict[str, Any]) -> object:
            return self.stub.Fit(pb.FitRequest(**fields), timeout=self.options.call_timeout)

        problems = []
        for label, fields, expected in fits:
            problems += self._expect(label, expected, partial(fit, fields))
        problems += self._expect(
            "predict with an unknown handle",
            grpc.StatusCode.NOT_FOUND,
            lambda: list(self.stub.Predict(pb.PredictRequest(model_handle="no-such-handle"), timeout=30.0)),
        )
        bad = make_case("malformed", "tampered", 12, 2, 3, seed=9)
        chunks = list(encode(bad.bundle))
        header = pb.GraphHeader()
        header.CopyFrom(chunks[0].header)
        header.graph_hash = "0" * 64
        tampered = [pb.GraphChunk(header=header, data=chunks[0].data), *chunks[1:]]
        problems += self._expect(
            "upload whose content does not match its hash",
            grpc.StatusCode.INVALID_ARGUMENT,
            lambda: self.stub.UploadGraph(iter(tampered), timeout=30.0),
        )
        problems += self._expect(
            "upload without a header",
            grpc.StatusCode.INVALID_ARGUMENT,
            lambda: self.stub.UploadGraph(iter([pb.GraphChunk(data=b"\0" * 16)]), timeout=30.0),
        )
        if problems:
            raise CheckFailed("; ".join(problems))
        return f"{len(fits) + 3} malformed requests refused with the right status"

    def _expect(self, label: str, expected: grpc.StatusCode, call: Callable[[], object]) -> list[str]:
        try:
            result = call()
        except grpc.RpcError as exc:
            if exc.code() == expected:
                return []
            if (
                exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
                and not self._alive()
            ):
                self.dead = True
                return [f"{label}: the service crashed ({exc.code().name})"]
            return [f"{label}: got {exc.code().name} ({exc.details()}), expected {expected.name}"]
        if isinstance(result, pb.FitResponse) and result.model_handle:
            _quiet_release(self.stub, result.model_handle)
        return [f"{label}: accepted, expected {expected.name}"]

    def check_labels(self) -> str:
        if not self.client.visible:
            return "skipped: nothing was uploaded"
        return (
            f"{len(self.client.visible)} graph(s) uploaded, labels only on train ∪ val nodes; "
            f"{self.client.fits_checked} fit(s) checked against their graph; test labels sent as -1"
        )

    def check_deadline(self, method: pb.MethodInfo, case: GraphCase) -> str:
        reason = self._capable(method, case)
        if reason:
            return reason
        limit, grace = self.options.deadline, self.options.grace
        start = time.perf_counter()
        try:
            fit = self._fit(method, case, time_limit=limit, timeout=limit + grace, config={})
        except grpc.RpcError as exc:
            elapsed = time.perf_counter() - start
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                return refusal(exc)
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and elapsed < limit + grace * 0.9:
                return f"stopped after {elapsed:.2f} s with DEADLINE_EXCEEDED"
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CheckFailed(
                    f"the fit hung past its deadline: time limit {limit:g} s, no answer after {elapsed:.1f} s "
                    "(a fit must check its deadline and answer DEADLINE_EXCEEDED)"
                ) from None
            raise CheckFailed(
                f"a fit with a {limit:g} s time limit answered {exc.code().name}: {exc.details()}"
            ) from None
        _quiet_release(self.stub, fit.model_handle)
        return f"finished within its {limit:g} s limit ({time.perf_counter() - start:.2f} s)"


def refusal(exc: grpc.RpcError) -> str:
    """The detail of a check whose fit the method refused as not fitting in memory."""
    return f"refused: RESOURCE_EXHAUSTED: {exc.details()}"


def read_probabilities(chunks: Iterator[pb.PredictChunk], case: GraphCase) -> np.ndarray:
    """Assemble a Predict stream, saying exactly what is wrong with a malformed one."""
    blocks, rows, classes = [], 0, None
    for chunk in chunks:
        if classes is None:
            classes = chunk.num_classes
        if chunk.num_classes != classes:
            raise CheckFailed(f"prediction chunks disagree on the class count ({classes} then {chunk.num_classes})")
        if chunk.row_offset != rows:
            raise CheckFailed(f"prediction chunk starts at row {chunk.row_offset}, expected {rows}")
        block = np.frombuffer(chunk.probabilities, dtype="<f4")
        if chunk.num_classes <= 0 or block.size != chunk.num_rows * chunk.num_classes:
            raise CheckFailed(
                f"prediction chunk at row {chunk.row_offset} holds {block.size} values, not {chunk.num_rows} x "
                f"{chunk.num_classes}"
            )
        blocks.append(block.reshape(chunk.num_rows, chunk.num_classes))
        rows += chunk.num_rows
    if classes is None:
        raise CheckFailed("predict returned no chunks")
    return np.concatenate(blocks) if blocks else np.zeros((0, classes), dtype=np.float32)


def probability_problem(probs: np.ndarray, case: GraphCase) -> str | None:
    n, c = case.num_nodes, case.num_classes
    if probs.shape[0] != n:
        return f"wrong row count: predict returned {probs.shape[0]} rows for a graph of {n} nodes"
    if probs.shape[1] != c:
        return f"wrong column count: predict returned {probs.shape[1]} classes, the graph has {c}"
    if not np.isfinite(probs).all():
        return f"probabilities are not finite ({int((~np.isfinite(probs)).sum())} NaN/inf values)"
    if (probs < -ROW_SUM_TOLERANCE).any() or (probs > 1 + ROW_SUM_TOLERANCE).any():
        return f"probabilities outside [0, 1] (min {probs.min():.3g}, max {probs.max():.3g})"
    sums = probs.sum(axis=1, dtype=np.float64)
    worst = int(np.abs(sums - 1).argmax())
    if abs(sums[worst] - 1) > ROW_SUM_TOLERANCE:
        bad = int((np.abs(sums - 1) > ROW_SUM_TOLERANCE).sum())
        return f"probability rows do not sum to one: {bad} of {n} rows off, e.g. row {worst} sums to {sums[worst]:.4g}"
    return None


def _quiet_release(stub: pb_grpc.MethodServiceStub, handle: str) -> None:
    try:
        stub.Release(pb.ReleaseRequest(model_handle=handle), timeout=10.0)
    except grpc.RpcError:
        pass


def run_checks(endpoint: str, options: Options | None = None) -> list[CheckResult]:
    """Every contract check against ``endpoint`` (host:port or unix:/path), in order."""
    conformance = Conformance(endpoint, options or Options())
    try:
        return conformance.run()
    finally:
        conformance.close()
