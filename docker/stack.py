"""Write the Docker Swarm stack for the method families, from the same manifests as everything else.

    python docker/stack.py [--replicas gnn=2 ...] [--families gnn ...] [--weights DIR] [--gpu] > stack.yaml
    docker stack deploy -c stack.yaml nodeground        # what `make swarm-up` does

One service per family (methods/<family>/manifest.toml), image ``nodeground/<family>:latest``,
``endpoint_mode: dnsrr`` so the service name resolves to every replica (the orchestrator keeps one
channel per replica: `--endpoint gnn=dns:///gnn:50051`; Swarm's VIP would balance each call to a
different replica, and the protocol is stateful), on one attachable overlay network that the
orchestrator's one-shot container joins. GFM families (those with a weights.toml) get the weights
directory mounted read-only at /weights. ``--gpu`` adds a generic NVIDIA GPU reservation per
replica (nodes must advertise it: dockerd ``--node-generic-resource gpu=...``). ``--tls DIR``
(what `make swarm-up` passes) makes every service serve TLS and require the shared token: DIR's
cert.pem, key.pem and token become Docker secrets (contract.security).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "proto")]

import yaml  # noqa: E402

from contract.security import CERT_ENV, KEY_ENV, NAME_ENV, TOKEN_FILE_ENV  # noqa: E402
from methods.families import ROOT, load_families  # noqa: E402

NETWORK = "nodeground"
PORT = 50051
TLS_NAME = "nodeground"  # the name the stack's certificate is issued for (clients check it, not the dialled IP)
SECRETS = {"nodeground_tls_cert": ("cert.pem", CERT_ENV), "nodeground_tls_key": ("key.pem", KEY_ENV), "nodeground_token": ("token", TOKEN_FILE_ENV)}


def stack(
    replicas: dict[str, int], weights: str, gpu: bool, threads: int, memory: str, only: list[str] | None = None, prefix: str = "nodeground", tls: Path | None = None
) -> dict:
    families = load_families()
    unknown = sorted((set(replicas) | set(only or ())) - set(families))
    if unknown:
        raise SystemExit(f"error: unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; known: {', '.join(sorted(families))}")
    services = {}
    for name, family in sorted(families.items()):
        if only and name not in only:
            continue
        service: dict = {
            "image": f"{prefix}/{family.image.rpartition('/')[2]}:latest",
            "command": ["python", "-m", "methods.serve", "--family", name, "--host", "0.0.0.0", "--port", str(PORT)],
            "environment": {"NODEGROUND_THREADS": str(threads)},
            "networks": [NETWORK],
            "deploy": {
                "endpoint_mode": "dnsrr",
                "replicas": replicas.get(name, 1),
                "restart_policy": {"condition": "on-failure"},
                "resources": {"limits": {"memory": memory}},
                "labels": {"nodeground.family": name, "nodeground.port": str(PORT)},
            },
        }
        if (ROOT / family.module.rpartition(".")[2] / "weights.toml").exists():
            service["volumes"] = [f"{weights}:/weights:ro"]
            service["environment"]["NODEGROUND_WEIGHTS"] = "/weights"
        if tls is not None:
            service["secrets"] = list(SECRETS)
            service["environment"].update({env: f"/run/secrets/{secret}" for secret, (_, env) in SECRETS.items()}, **{NAME_ENV: TLS_NAME})
        if gpu:
            service["deploy"]["resources"]["reservations"] = {"generic_resources": [{"discrete_resource_spec": {"kind": "gpu", "value": 1}}]}
        services[name] = service
    document = {"version": "3.8", "services": services, "networks": {NETWORK: {"driver": "overlay", "attachable": True}}}
    if tls is not None:
        document["secrets"] = {secret: {"file": str(tls.resolve() / file)} for secret, (file, _) in SECRETS.items()}
    return document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", nargs="*", default=[], help="FAMILY=N (default 1 each)")
    parser.add_argument("--weights", default=str(Path.home() / ".cache" / "nodeground" / "weights"), help="host directory of GFM weights")
    parser.add_argument("--families", nargs="*", default=[], help="deploy only these families (default: all)")
    parser.add_argument("--prefix", default="nodeground", help="image name prefix (make's IMAGE_PREFIX)")
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--memory", default="8G")
    parser.add_argument("--tls", type=Path, help="directory with cert.pem, key.pem and token: services serve TLS and require the token")
    args = parser.parse_args()
    replicas = {}
    for item in args.replicas:
        name, _, count = item.partition("=")
        if not count.isdigit() or int(count) < 0:
            raise SystemExit(f"error: --replicas takes FAMILY=N, got {item!r}")
        replicas[name] = int(count)
    sys.stdout.write("# Generated by docker/stack.py from the family manifests; do not edit.\n")
    yaml.safe_dump(stack(replicas, args.weights, args.gpu, args.threads, args.memory, args.families, args.prefix, args.tls), sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
