"""The method families' services, written from their manifests: the compose file and the Swarm stack.

    python docker/services.py compose [--out FILE]       # write .cache/compose.yaml (make compose; make up runs it)
    python docker/services.py checkout                   # this checkout's compose project and Swarm stack name
    python docker/services.py stack [--replicas gnn=2 ...] [--families gnn ...] [--weights DIR] [--gpu] > stack.yaml
    docker stack deploy -c stack.yaml "$(python docker/services.py checkout)"   # what `make swarm-up` does

One service per family (methods/<family>/manifest.toml), named like the family and running image
``<prefix>/<family>``, with the labels discovery reads (``nodeground.family``, ``nodeground.port``,
``nodeground.checkout``: this checkout, whose sweeps alone use them; ``nodeground.version``: the
family's version here, which discovery checks).
A family with a weights catalog (methods/<family>/weights.toml) gets the weights directory mounted
read-only at /weights; weights are never baked into images.

Compose: each container publishes 50051 on an ephemeral 127.0.0.1 port and is found by its labels.
Swarm: ``endpoint_mode: dnsrr``, so the service name resolves to every replica (the orchestrator
keeps one channel per replica: `--endpoint gnn=dns:///gnn:50051`; Swarm's VIP would balance each
call to a different replica, and the protocol is stateful), on one attachable overlay network that
the orchestrator's one-shot container joins. ``--gpu`` adds a generic NVIDIA GPU reservation per
replica (nodes must advertise it: dockerd ``--node-generic-resource gpu=...``). ``--tls DIR``
(what `make swarm-up` passes) makes every service serve TLS and require the shared token: DIR's
cert.pem, key.pem and token become Docker secrets (contract.security).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import yaml  # noqa: E402

from contract.families import ROOT, load_families  # noqa: E402
from contract.handshake import FAMILY_LABEL, PORT_LABEL, SERVICE_PORT  # noqa: E402
from contract.hardware import kernel_policy  # noqa: E402
from contract.security import CERT_ENV, KEY_ENV, NAME_ENV, TOKEN_FILE_ENV  # noqa: E402
from contract.weights import WEIGHTS_MOUNT, weights_dir  # noqa: E402
from orchestrator.services.containers import CHECKOUT_LABEL, VERSION_LABEL, checkout_id, family_version  # noqa: E402

NETWORK = "nodeground"
TLS_NAME = "nodeground"  # the name the stack's certificate is issued for (clients check it, not the dialled IP)
SECRETS = {
    "nodeground_tls_cert": ("cert.pem", CERT_ENV),
    "nodeground_tls_key": ("key.pem", KEY_ENV),
    "nodeground_token": ("token", TOKEN_FILE_ENV),
}
# Generated, never committed: a new family is one new folder under methods/ and nothing else.
COMPOSE_FILE = REPO / ".cache" / "compose.yaml"
# Compose reads these from the environment (make sets NODEGROUND_IMAGE_PREFIX from IMAGE_PREFIX
# and NODEGROUND_WEIGHTS to where `make weights` fetches them).
COMPOSE_PREFIX = "${NODEGROUND_IMAGE_PREFIX:-nodeground}"
COMPOSE_HEADER = """\
# Method-family services, generated from methods/*/manifest.toml by `make compose`
# (python docker/services.py compose), which `make up` runs first; do not edit, not committed.
# Works with docker-compose v1 (>= 1.27, Compose Specification format, hence no `version:` key)
# and `docker compose` v2.
#   make up                            # every family; or: docker compose -p {project} -f .cache/compose.yaml up -d
#   make up FAMILIES="gnn graphany"    # only these
#   make up SCALE="gnn=2 graphtransformer=2"   # replicas (--scale gnn=2 ... for v1 and v2)
#   make up GPU=1                      # adds .cache/compose.gpu.yaml (NVIDIA device reservation per GPU)
# Each container publishes 50051 on an ephemeral 127.0.0.1 port; the orchestrator of this
# checkout finds every replica by the nodeground.* labels (nodeground.checkout={project}: another
# checkout's or user's containers on the same host are not used).
# Knobs (environment or a .env file next to where compose runs):
#   NODEGROUND_THREADS  torch threads per service (default 1)
#   NODEGROUND_KERNELS  native (default) or pinned kernels (docs/running.md#threads-and-kernels)
#   NODEGROUND_MEM      memory limit per container (default 8g)
#   NODEGROUND_WEIGHTS  host directory of pretrained weights, mounted read-only into GFM
#                       containers; `make up` sets it to where `make weights` fetches them
#                       (NODEGROUND_WEIGHTS, else $NODEGROUND_CACHE/weights, else
#                       ~/.cache/nodeground/weights: contract.weights.weights_dir, which also
#                       wrote the default below when this file was generated). A GFM container
#                       whose weights are missing reports unhealthy.
#   NODEGROUND_RANDOM_INIT_WEIGHTS=1  in-context GFMs without weights run with random init (smoke runs)
#   NODEGROUND_RANDOM_INIT_ARCH=tiny  ... with their smallest structure (checks of the path, not its cost)
#   NODEGROUND_IMAGE_PREFIX  image names are <prefix>/<family>:latest (default nodeground;
#                       make sets it from IMAGE_PREFIX)
# A family with a weights catalog (methods/<family>/weights.toml) reads its frozen weights from
# the read-only mount at /weights; weights are never baked into images.
"""


@dataclass(frozen=True)
class FamilyService:
    """What every deployment of one family shares, whatever runs it."""

    family: str
    weights: bool  # mounts the weights directory read-only at /weights
    version: str  # the family's version in this checkout (discovery refuses containers of another)

    def image(self, prefix: str, tag: str = "latest") -> str:
        return f"{prefix}/{self.family}:{tag}"

    @property
    def labels(self) -> dict[str, str]:
        return {
            FAMILY_LABEL: self.family,
            PORT_LABEL: str(SERVICE_PORT),
            CHECKOUT_LABEL: checkout_id(REPO),
            VERSION_LABEL: self.version,
        }


def family_services(only: list[str] | None = None) -> list[FamilyService]:
    """The families of the manifests (``only``: a subset, each of which must exist), sorted by name."""
    families = load_families()
    unknown = sorted(set(only or ()) - set(families))
    if unknown:
        raise SystemExit(
            f"error: unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; known: "
            f"{', '.join(sorted(families))}"
        )
    return [
        FamilyService(name, (ROOT / name / "weights.toml").exists(), family_version(families[name]))
        for name in sorted(families)
        if not only or name in only
    ]


def compose() -> dict:
    """The compose file: one service per family, knobs from the environment."""
    services = {}
    for s in family_services():
        service: dict = {
            "image": s.image(COMPOSE_PREFIX),
            "restart": "on-failure",
            "init": True,
            "mem_limit": "${NODEGROUND_MEM:-8g}",
            "ports": [f"127.0.0.1::{SERVICE_PORT}"],
            "environment": {
                "NODEGROUND_THREADS": "${NODEGROUND_THREADS:-1}",
                "NODEGROUND_KERNELS": "${NODEGROUND_KERNELS:-native}",
            },
            "labels": s.labels,
        }
        if s.weights:
            service["volumes"] = [f"${{NODEGROUND_WEIGHTS:-{weights_dir()}}}:{WEIGHTS_MOUNT}:ro"]
            # 1: an in-context GFM without its weights runs its structure with random init (smoke runs only)
            service["environment"].update(
                NODEGROUND_WEIGHTS=WEIGHTS_MOUNT,
                NODEGROUND_RANDOM_INIT_WEIGHTS="${NODEGROUND_RANDOM_INIT_WEIGHTS:-0}",
                NODEGROUND_RANDOM_INIT_ARCH="${NODEGROUND_RANDOM_INIT_ARCH:-}",
            )
        services[s.family] = service
    return {"services": services}


def compose_text() -> str:
    return COMPOSE_HEADER.format(project=checkout_id(REPO)) + "\n" + yaml.safe_dump(compose(), sort_keys=False)


def stack(
    replicas: dict[str, int],
    weights: str,
    gpu: bool,
    threads: int,
    memory: str,
    only: list[str] | None = None,
    prefix: str = "nodeground",
    tls: Path | None = None,
) -> dict:
    """The Swarm stack: ``replicas`` per family (default 1), dnsrr endpoints on one overlay network;
    with ``tls`` every service serves TLS and requires the token (Docker secrets from that directory)."""
    family_services(list(replicas))  # an unknown family in --replicas is an error too
    services = {}
    for s in family_services(only):
        service: dict = {
            "image": s.image(prefix),
            "command": [
                "python",
                "-m",
                "methods.serve",
                "--family",
                s.family,
                "--host",
                "0.0.0.0",
                "--port",
                str(SERVICE_PORT),
            ],
            "environment": {"NODEGROUND_THREADS": str(threads), "NODEGROUND_KERNELS": kernel_policy()},
            "networks": [NETWORK],
            "labels": s.labels,
            "deploy": {
                "endpoint_mode": "dnsrr",
                "replicas": replicas.get(s.family, 1),
                "restart_policy": {"condition": "on-failure"},
                "resources": {"limits": {"memory": memory}},
                "labels": s.labels,
            },
        }
        if s.weights:
            service["volumes"] = [f"{weights}:{WEIGHTS_MOUNT}:ro"]
            service["environment"]["NODEGROUND_WEIGHTS"] = WEIGHTS_MOUNT
        if tls is not None:
            service["secrets"] = list(SECRETS)
            service["environment"].update(
                {env: f"/run/secrets/{secret}" for secret, (_, env) in SECRETS.items()}, **{NAME_ENV: TLS_NAME}
            )
        if gpu:
            service["deploy"]["resources"]["reservations"] = {
                "generic_resources": [{"discrete_resource_spec": {"kind": "gpu", "value": 1}}]
            }
        services[s.family] = service
    document = {
        "version": "3.8",
        "services": services,
        "networks": {NETWORK: {"driver": "overlay", "attachable": True}},
    }
    if tls is not None:
        document["secrets"] = {secret: {"file": str(tls.resolve() / file)} for secret, (file, _) in SECRETS.items()}
    return document


def _replicas(items: list[str]) -> dict[str, int]:
    replicas = {}
    for item in items:
        name, _, count = item.partition("=")
        if not count.isdigit():
            raise SystemExit(f"error: --replicas takes FAMILY=N, got {item!r}")
        replicas[name] = int(count)
    return replicas


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("compose", help=f"write the compose file ({COMPOSE_FILE.relative_to(REPO)})")
    c.add_argument("--out", type=Path, default=COMPOSE_FILE, help="where to write it")
    commands.add_parser("checkout", help="print this checkout's compose project and Swarm stack name")
    s = commands.add_parser("stack", help="print the Swarm stack")
    s.add_argument("--replicas", nargs="*", default=[], help="FAMILY=N (default 1 each)")
    s.add_argument(
        "--weights",
        default=str(weights_dir()),
        help="host directory of GFM weights (default: NODEGROUND_WEIGHTS, else $NODEGROUND_CACHE/weights)",
    )
    s.add_argument("--families", nargs="*", default=[], help="deploy only these families (default: all)")
    s.add_argument("--prefix", default="nodeground", help="image name prefix (make's IMAGE_PREFIX)")
    s.add_argument("--gpu", action="store_true")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--memory", default="8G")
    s.add_argument(
        "--tls", type=Path, help="directory with cert.pem, key.pem and token: services serve TLS and require the token"
    )
    args = parser.parse_args(argv)
    if args.command == "checkout":
        print(checkout_id(REPO))
        return 0
    if args.command == "compose":
        text = compose_text()
        if not args.out.exists() or args.out.read_text() != text:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        return 0
    sys.stdout.write("# Generated by docker/services.py from the family manifests; do not edit.\n")
    yaml.safe_dump(
        stack(
            _replicas(args.replicas),
            args.weights,
            args.gpu,
            args.threads,
            args.memory,
            args.families,
            args.prefix,
            args.tls,
        ),
        sys.stdout,
        sort_keys=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
