"""Docker tests need an engine; without one they skip with the reason."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def docker_engine() -> None:
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine answers: {exc}")
