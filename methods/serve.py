"""Serve one method family on a port: ``python -m methods.serve --family gnn --port 50051``.

With ``--port 0`` the OS picks a free port; the first stdout line says which
(``NODEGROUND_LISTENING <port>``), so a launcher can start services without races.
``--check`` only loads the family and exits: the images' build-time smoke test.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

import grpc
import torch

from contract.address import AddressError, check_host
from contract.cost import prior_problems
from contract.families import Family, load_families
from contract.handshake import GRAPH_DIR_ENV, READY_PREFIX, SERVICE_PORT
from contract.hardware import PINNED, KernelPolicyError, kernel_environment, kernel_policy, kernels_in_effect
from contract.security import Security, SecurityError
from contract.settings import (
    GRAPH_CACHE_BYTES,
    MAX_MODELS,
    MAX_UPLOAD_BYTES,
    SERVICE_LIMITS,
    SERVICE_SETTINGS,
    THREADS,
    UPLOAD_IDLE_SECONDS,
    UPLOAD_WAIT_SECONDS,
    Setting,
    SettingError,
    check_all,
)
from contract.weights import load_weights_catalog
from methods.families import method_classes
from methods.sdk.allocator import keep_freed_memory
from methods.sdk.health_file import HEALTH_FILE_ENV, loopback_address, start_health_file
from methods.sdk.method import DEVICE_ENV
from methods.sdk.service import MethodServicer, build_server

# One line of `pip check`: "<dist> <version> has requirement <req>, but you have <name> <version>."
# or "<dist> <version> requires <name>, which is not installed."
_PIP_CHECK_LINE = re.compile(r"^(\S+) \S+ (?:has requirement ([A-Za-z0-9._-]+)|requires ([A-Za-z0-9._-]+))")
PROJECT = "nodeground"
PORT = Setting("", int, 0, 65535, SERVICE_PORT, "port to bind; 0 picks a free one", "--port")
# After SIGTERM (or the launcher's death) the calls in flight get this long to end: a running fit is cancelled at
# once and ends at its next check; one that does not check by then is left behind (the process exits without it).
STOP_GRACE_S = 2.0


def undeclared_conflicts(family: Family, pip_check: str) -> list[str]:
    """The lines of a `pip check` report that the family's manifest does not declare ([dependencies.differs])."""
    declared = {_normalise(name) for name in family.differs}
    bad = []
    for line in pip_check.splitlines():
        line = line.strip()
        if not line or line.startswith("No broken requirements"):
            continue
        match = _PIP_CHECK_LINE.match(line)
        if match is not None and _normalise(match.group(1)) == PROJECT:
            continue  # this project is installed --no-deps on purpose: services need only the runtime
        if match is None or match.group(2) is None or _normalise(match.group(2)) not in declared:
            bad.append(line)
    return bad


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check(family: Family, pip_check: str | None = None) -> str:
    """What an image must hold to serve ``family``: its methods import and match the manifest, the
    weights catalog of a family with a weights.toml is installed (the weights themselves are mounted),
    and the installed distributions conflict only where the manifest says they may (``pip_check``)."""
    if pip_check is not None:
        bad = undeclared_conflicts(family, pip_check)
        if bad:
            raise RuntimeError(
                f"family {family.name}: pip check reports {'; '.join(bad)} (declare an upstream pin the image does not "
                f"follow, and why, in methods/{family.name}/manifest.toml [dependencies.differs])"
            )
    classes = method_classes(family)
    problems = prior_problems(family, {m.name: m.default_config for m in classes})
    if problems:
        raise RuntimeError(f"family {family.name}: its cost prior is malformed: {'; '.join(problems)}")
    names = [m.name for m in classes]
    if (Path(__file__).resolve().parent / family.name / "weights.toml").exists():
        if not any(entry.model == family.name for entry in load_weights_catalog().values()):
            raise RuntimeError(
                f"family {family.name}: weights.toml is not installed (no catalog entry for model {family.name!r})"
            )
    return f"{family.name}: {', '.join(names)}: smoke ok"


class _OneLineParser(argparse.ArgumentParser):
    """A usage error is one ``error:`` line and exit 2, without argparse's usage box."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="nodeground-serve", description=__doc__)
    parser.add_argument(
        "--family",
        default=os.environ.get("NODEGROUND_FAMILY"),
        help="method family to host (a folder under methods/; default: NODEGROUND_FAMILY, set in the images)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0 in containers)")
    for setting in (PORT, *SERVICE_LIMITS):  # parsed by their Setting once all are known (``settings``)
        default = f"{setting.default} (default; {setting.env} sets it)" if setting.env else setting.default
        parser.add_argument(setting.flag, help=f"{setting.help}: {setting.expected()}; {default}")
    parser.add_argument(
        "--graph-dir",
        default=os.environ.get(GRAPH_DIR_ENV, ""),
        help=f"an absolute directory of this host's where graphs are handed over (AttachGraph; default: "
        f"{GRAPH_DIR_ENV}, which a local launcher sets; none: graphs come only as upload streams)",
    )
    parser.add_argument(
        "--check", action="store_true", help="load the family, check it against its manifest, print one line and exit"
    )
    parser.add_argument(
        "--pip-check", type=Path, help="with --check: a `pip check` report, which may name only declared conflicts"
    )
    return parser


def settings(args: argparse.Namespace) -> dict[Setting, float]:
    """Every setting the service reads, parsed once: the limits and the port (a flag, else its variable, else the
    default), then the rest of the environment (``SERVICE_SETTINGS``) and the device; SettingError names the first
    bad one."""
    values = {}
    for setting in (PORT, *SERVICE_LIMITS):
        given = getattr(args, setting.flag.removeprefix("--").replace("-", "_"))
        value = setting.parse(given, setting.flag) if given is not None else setting.read()
        values[setting] = float(value) if value is not None else math.nan  # every one has a default
    check_all(SERVICE_SETTINGS)
    device = os.environ.get(DEVICE_ENV, "")
    if device:
        try:
            torch.device(device)
        except RuntimeError:
            raise SettingError(f"{DEVICE_ENV}={device[:40]!r}: must be a torch device such as cpu or cuda:0") from None
    return values


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        limits = settings(args)
        check_host(args.host, "--host")
        policy = kernel_policy()
    except (SettingError, AddressError, KernelPolicyError) as exc:
        parser.error(str(exc))
    if policy == PINNED and kernels_in_effect() != PINNED:  # the libraries read their kernels' variables as they load
        argv = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, "-m", "methods.serve", *argv], kernel_environment(os.environ))
    families = load_families()
    if args.family is None:
        parser.error("--family is required (or set NODEGROUND_FAMILY)")
    if args.family not in families:
        print(f"error: unknown family {args.family!r}; known: {', '.join(sorted(families))}", file=sys.stderr)
        return 2
    if args.graph_dir and not (os.path.isabs(args.graph_dir) and os.path.isdir(args.graph_dir)):
        print(f"error: the graph directory {args.graph_dir!r} is not an absolute path to a directory", file=sys.stderr)
        return 2
    family = families[args.family]
    if args.check:
        print(check(family, args.pip_check.read_text() if args.pip_check else None))
        return 0
    kept = keep_freed_memory()
    torch.set_num_threads(int(THREADS.read() or 1))
    logging.getLogger("nodeground.serve").info(
        "family %s, torch threads %d, %s kernels, freed memory kept between epochs: %s",
        args.family,
        torch.get_num_threads(),
        kernels_in_effect(),
        kept,
    )
    classes = method_classes(family)
    problems = prior_problems(family, {m.name: m.default_config for m in classes})
    if problems:  # its resource checks read it: a service that cannot read its own prior does not start
        print(f"error: family {family.name}: its cost prior is malformed: {'; '.join(problems)}", file=sys.stderr)
        return 2
    servicer = MethodServicer(
        family.name,
        classes,
        graph_cache_bytes=int(limits[GRAPH_CACHE_BYTES]),
        max_upload_bytes=int(limits[MAX_UPLOAD_BYTES]),
        upload_wait_seconds=limits[UPLOAD_WAIT_SECONDS],
        upload_idle_seconds=limits[UPLOAD_IDLE_SECONDS],
        max_models=int(limits[MAX_MODELS]),
        shared_graph_dir=args.graph_dir,
    )
    try:
        security = Security.from_env()
        server, port = build_server(servicer, f"{args.host}:{int(limits[PORT])}", security=security)
    except (OSError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not security.serves_tls and not is_loopback(args.host):
        logging.getLogger("nodeground.serve").warning(
            "serving plaintext without a token on %s: anyone who reaches this port can call it; on a shared network "
            "set NODEGROUND_TLS_CERT, NODEGROUND_TLS_KEY and NODEGROUND_TOKEN_FILE "
            "(docs/services.md#beyond-loopback-tls-and-a-token)",
            args.host,
        )
    health_file = os.environ.get(HEALTH_FILE_ENV)
    if health_file:  # set in the images, read by their HEALTHCHECK
        start_health_file(loopback_address(args.host, port), Path(health_file), security=security.loopback_client())
    serve(servicer, server, port)


def serve(servicer: MethodServicer, server: grpc.Server, port: int) -> NoReturn:
    """Serve until SIGTERM or SIGINT (the lifeline sends SIGTERM once the launcher is gone), then stop on time.

    Stopping cancels the fits in flight as the watchdog's cancellation does (each ends at its next check and
    answers UNAVAILABLE) and gives every call in flight ``STOP_GRACE_S`` to end; then the process exits at once,
    without joining gRPC's worker threads: a fit that never checks would keep it alive until that fit ended.
    """
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    server.start()
    print(f"{READY_PREFIX} {port}", flush=True)
    stopped.wait()
    servicer.stop()
    server.stop(grace=STOP_GRACE_S).wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def cli() -> None:
    sys.exit(main())


if __name__ == "__main__":
    cli()
