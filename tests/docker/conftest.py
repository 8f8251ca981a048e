"""Docker tests need an engine; without one they skip with the reason.

They test the images `make images` builds: ``<prefix>/<family>:latest``, the prefix being make's
IMAGE_PREFIX (``NODEGROUND_IMAGE_PREFIX``, default nodeground), so that a checkout can test its own
images beside others' (``IMAGE_PREFIX=mine BASE_TAG=nodeground/base:latest COMPOSE_PROJECT=mine``
in the environment reach the make targets the tests run too).
"""

from __future__ import annotations

import os

import pytest

IMAGE_PREFIX = os.environ.get("NODEGROUND_IMAGE_PREFIX") or os.environ.get("IMAGE_PREFIX") or "nodeground"


@pytest.fixture(scope="session")
def docker_engine() -> None:
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine answers: {exc}")
