"""Readiness: a method that reads pretrained weights (``Method.weights``) cannot fit until they verify. While any
does not, gRPC health says NOT_SERVING, Describe lists why (``not_ready``) and such a fit is refused with
FAILED_PRECONDITION. The check is repeated when health or Describe is asked and the last one is a few seconds
old, so weights fetched after the service started make it healthy without a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health, health_pb2

from contract.handshake import HEALTH_SERVICES
from contract.v1 import method_service_pb2 as pb
from methods.sdk.method import Method

log = logging.getLogger("nodeground.service")

READINESS_POLL_S = 2.0  # how often a ready service that reads weights re-verifies them


class Readiness:
    """The service's readiness: which of its methods' weights do not verify, and why."""

    def __init__(self, methods: Mapping[str, type[Method]]) -> None:
        self.methods = methods
        self._not_ready: list[pb.NotReady] = []
        self._health: health.HealthServicer | None = None
        self._lock = threading.Lock()
        self._checked_at = float("-inf")

    def refresh(self) -> list[pb.NotReady]:
        """The readiness: re-verified on every ask while not ready, at most every READINESS_POLL_S once ready.

        Weights fetched a moment before a client asks must count at once (a client told "not ready" stops
        its sweep); a missing file costs a stat, and a new one is hashed once (``contract.weights``). A
        ready service re-checks on a poll, which catches weights removed or altered under it.
        """
        with self._lock:
            if self._not_ready or time.monotonic() - self._checked_at >= READINESS_POLL_S:
                self.check()
            return self._not_ready

    def check(self) -> list[pb.NotReady]:
        """Re-verify every method's weights; publish the result to health (NOT_SERVING while any is unusable)."""
        self._checked_at = time.monotonic()
        not_ready = [
            pb.NotReady(method=name, weights_id=weights_id, reason=reason)
            for name, method in self.methods.items()
            for weights_id, reason in method.weights_problems().items()
        ]
        if [r.reason for r in not_ready] != [r.reason for r in self._not_ready]:
            for item in not_ready:
                log.warning("not ready: %s", item.reason)
        self._not_ready = not_ready
        if self._health is not None:
            status = health_pb2.HealthCheckResponse.NOT_SERVING if not_ready else health_pb2.HealthCheckResponse.SERVING
            for service in HEALTH_SERVICES:
                self._health.set(service, status)
        return not_ready

    def publish(self, health_servicer: health.HealthServicer) -> None:
        """Report readiness through ``health_servicer`` from now on (checked at once)."""
        self._health = health_servicer
        with self._lock:
            self.check()

    def of(self, method: str) -> list[pb.NotReady]:
        """Why ``method`` is not ready (nothing when it is)."""
        return [r for r in self.refresh() if r.method == method]


class ReadinessHealth(health.HealthServicer):
    """Standard gRPC health whose answer re-verifies the service's readiness when it is stale."""

    def __init__(self, readiness: Readiness) -> None:
        super().__init__()
        self._readiness = readiness

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self._readiness.refresh()
        return super().Check(request, context)
