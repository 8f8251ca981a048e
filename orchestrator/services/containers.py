"""Find running method containers through the Docker engine (labels nodeground.family / nodeground.port)."""

from __future__ import annotations


def discover_endpoints() -> dict[str, list[str]]:
    """family -> ["127.0.0.1:PORT", ...] for running labelled containers; {} without an engine."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        containers = client.containers.list(filters={"label": "nodeground.family", "status": "running"})
    except Exception:  # no SDK, no engine, no permission: there are no containers to use
        return {}
    found: dict[str, list[str]] = {}
    for container in containers:
        port = container.labels.get("nodeground.port", "50051")
        for binding in (container.ports or {}).get(f"{port}/tcp") or []:
            host = binding.get("HostIp") or "127.0.0.1"
            found.setdefault(container.labels["nodeground.family"], []).append(
                f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{binding['HostPort']}"
            )
    return found
