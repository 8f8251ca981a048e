"""Embedded services: a start-up that runs out of time says so, and the time is configurable."""

from __future__ import annotations

import pytest

from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.embedded import START_TIMEOUT_ENV, START_TIMEOUT_S, EmbeddedService, start_timeout


def test_a_service_too_slow_to_start_is_named_as_stopped_by_the_orchestrator(monkeypatch, tmp_path):
    monkeypatch.setenv(START_TIMEOUT_ENV, "0.05")  # far less than any service's imports take
    service = EmbeddedService("gnn", log_dir=tmp_path)
    with pytest.raises(ServiceUnavailable) as err:
        service.start()
    message = str(err.value)
    assert "did not announce its port within 0.05 s, so the orchestrator stopped it" in message, message
    assert START_TIMEOUT_ENV in message and str(tmp_path / "gnn.log") in message
    assert not service.alive()


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "soon"])
def test_a_start_timeout_that_is_not_a_positive_number_is_refused(monkeypatch, value):
    monkeypatch.setenv(START_TIMEOUT_ENV, value)
    with pytest.raises(ServiceUnavailable, match=f"{START_TIMEOUT_ENV}=.* must be a positive number of seconds"):
        start_timeout()


def test_the_start_timeout_defaults_and_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(START_TIMEOUT_ENV, raising=False)
    assert start_timeout() == START_TIMEOUT_S
    monkeypatch.setenv(START_TIMEOUT_ENV, "600")
    assert start_timeout() == 600.0
