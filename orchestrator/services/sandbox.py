"""Run an untrusted method image so that it can serve the proto and do nothing else.

The method container gets:

- **no network**: ``network_mode=none`` — only its own loopback. The orchestrator
  reaches it through a relay container that joins the method's network
  namespace (so it can dial 127.0.0.1:<port> there) and exposes it as a unix
  socket in a private host directory. The relay is our code, from our base
  image; the method container never sees the socket directory, and has no
  route to the host or anywhere else;
- a **read-only root filesystem**, a size-limited ``/tmp`` tmpfs (``HOME=/tmp``);
- **all capabilities dropped**, ``no-new-privileges``;
- **memory** (swap included), **CPU** and **process-count** limits;
- a fixed **non-root user** (uid:gid 10001:10001 unless told otherwise),
  whatever ``USER`` the image declares;
- only the **weights directory**, if any, mounted read-only at ``/weights`` (``contract.weights.WEIGHTS_MOUNT``).

``Sandbox.applied()`` reads back from the engine what actually applied, so a
run can record it. Works with the Docker SDK against Docker 20.10+ on Linux.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from contract.handshake import PORT_LABEL, SERVICE_PORT
from contract.hardware import KERNELS_ENV, kernel_policy
from contract.security import Security
from contract.weights import WEIGHTS_MOUNT
from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.containers import SANDBOX_LABEL

RELAY_IMAGE = os.environ.get("NODEGROUND_RELAY_IMAGE", "nodeground/base:latest")
SOCKET_NAME = "method.sock"

# The relay: unix socket (host side) <-> 127.0.0.1:PORT inside the method's network namespace.
RELAY_SOURCE = r"""
import asyncio, os, sys
path, port = sys.argv[1], int(sys.argv[2])
async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass
async def handle(client_r, client_w):
    try:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        client_w.close()
        return
    await asyncio.gather(pipe(client_r, up_w), pipe(up_r, client_w))
async def main():
    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(handle, path)
    os.chmod(path, 0o600)
    print("relay ready", flush=True)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"""


class SandboxError(RuntimeError):
    """The image could not be started in the sandbox (missing image, no engine, ...)."""


@dataclass(frozen=True)
class SandboxLimits:
    memory: str = "4g"
    cpus: float = 2.0
    pids: int = 512
    tmp_size: str = "1g"
    user: str = "10001:10001"

    def nano_cpus(self) -> int:
        return int(self.cpus * 1e9)


def _docker(timeout: float = 120.0) -> Any:
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a project dependency
        raise SandboxError("the docker Python package is not installed") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise SandboxError(f"no Docker engine answers: {exc}") from None
    return client


def image_info(image: str, client: Any | None = None) -> dict[str, Any]:
    """Id (content digest of the image config), repo digests, tags, labels of a local image."""
    own = client is None
    client = client or _docker()
    try:
        import docker.errors

        try:
            img = client.images.get(image)
        except docker.errors.ImageNotFound:
            raise SandboxError(f"no local image {image!r}; build it first (e.g. make image-NAME)") from None
        attrs = img.attrs
        return {
            "image": image,
            "id": img.id,
            "repo_digests": attrs.get("RepoDigests") or [],
            "tags": img.tags,
            "created": attrs.get("Created"),
            "labels": (attrs.get("Config") or {}).get("Labels") or {},
            "user": (attrs.get("Config") or {}).get("User") or "",
        }
    finally:
        if own:
            client.close()


class Sandbox:
    """One sandboxed method container plus its relay; a context manager.

    ``endpoint`` (``unix:/...``) is what a ``MethodClient`` dials.
    """

    def __init__(
        self,
        image: str,
        limits: SandboxLimits | None = None,
        weights: Path | None = None,
        env: dict[str, str] | None = None,
        relay_image: str = RELAY_IMAGE,
        start_timeout: float = 120.0,
    ) -> None:
        self.image = image
        self.limits = limits or SandboxLimits()
        self.weights = Path(weights).resolve() if weights else None
        self.env = dict(env or {})
        self.relay_image = relay_image
        self.start_timeout = start_timeout
        self.name = f"nodeground-sandbox-{uuid.uuid4().hex[:10]}"
        self.client: Any = None
        self.container: Any = None
        self.relay: Any = None
        self.socket_dir: Path | None = None
        self.endpoint = ""
        self.info: dict[str, Any] = {}

    # ---- lifecycle ----------------------------------------------------------

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        self.client = _docker()
        self.info = image_info(self.image, self.client)
        try:
            self.client.images.get(self.relay_image)
        except Exception:
            raise SandboxError(f"the relay image {self.relay_image!r} is missing (make images builds it)") from None
        if self.weights is not None and not self.weights.is_dir():
            raise SandboxError(f"weights directory not found: {self.weights}")
        self.socket_dir = Path(tempfile.mkdtemp(prefix="nodeground-sandbox-"))
        os.chmod(self.socket_dir, 0o700)
        port = int(self.info["labels"].get(PORT_LABEL) or SERVICE_PORT)
        try:
            self._start_method()
            self._start_relay(port)
        except Exception:
            self.stop()
            raise
        self.endpoint = f"unix:{self.socket_dir / SOCKET_NAME}"
        return self.endpoint

    def _method_kwargs(self) -> dict[str, Any]:
        limits = self.limits
        # The thread rule of every run (docs/running.md#threads-and-kernels): one thread, the kernels the policy names,
        # so a submission's costs are comparable with the reference's; --cpus only caps the container.
        env = {"HOME": "/tmp", "TMPDIR": "/tmp", "NODEGROUND_THREADS": "1", KERNELS_ENV: kernel_policy(), **self.env}
        volumes = {}
        if self.weights is not None:
            volumes[str(self.weights)] = {"bind": WEIGHTS_MOUNT, "mode": "ro"}
            env["NODEGROUND_WEIGHTS"] = WEIGHTS_MOUNT
        return dict(
            name=self.name,
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_size},mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=limits.nano_cpus(),
            pids_limit=limits.pids,
            user=limits.user,
            environment=env,
            volumes=volumes,
            labels={SANDBOX_LABEL: "method"},
            init=True,
        )

    def _start_method(self) -> None:
        self.container = self.client.containers.run(self.image, **self._method_kwargs())

    def _start_relay(self, port: int) -> None:
        assert self.socket_dir is not None
        self.relay = self.client.containers.run(
            self.relay_image,
            ["python3", "-c", RELAY_SOURCE, f"/sock/{SOCKET_NAME}", str(port)],
            name=f"{self.name}-relay",
            detach=True,
            network_mode=f"container:{self.container.id}",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit="256m",
            pids_limit=64,
            user=f"{os.getuid()}:{os.getgid()}",
            volumes={str(self.socket_dir): {"bind": "/sock", "mode": "rw"}},
            labels={SANDBOX_LABEL: "relay"},
        )
        deadline = time.monotonic() + 30
        sock = self.socket_dir / SOCKET_NAME
        while not sock.exists():
            self.relay.reload()
            if self.relay.status == "exited" or time.monotonic() > deadline:
                raise SandboxError(
                    f"the sandbox relay did not start: {self.relay.logs()[-2000:].decode(errors='replace')}"
                )
            time.sleep(0.1)

    def wait_healthy(self, timeout: float | None = None) -> None:
        from orchestrator.services.client import MethodClient

        client = MethodClient(self.endpoint, Security())  # the sandbox publishes on loopback, plaintext
        try:
            client.wait_healthy(timeout or self.start_timeout)
        except ServiceUnavailable as exc:
            self.container.reload()
            raise ServiceUnavailable(
                f"{exc}; container {self.container.status}; last log lines:\n{self.logs(20)}"
            ) from None
        finally:
            client.close()

    def restart(self) -> None:
        """Restart the method container (after it died); the relay follows its namespace."""
        self._remove(self.relay)
        self._remove(self.container)
        self.relay = self.container = None
        self._start_method()
        self._start_relay(int(self.info["labels"].get(PORT_LABEL) or SERVICE_PORT))

    def logs(self, tail: int = 200) -> str:
        if self.container is None:
            return ""
        try:
            return self.container.logs(tail=tail).decode(errors="replace")
        except Exception:
            return ""

    def stop(self) -> None:
        for c in (self.relay, self.container):
            self._remove(c)
        self.relay = self.container = None
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
        if self.client is not None:
            self.client.close()
            self.client = None

    @staticmethod
    def _remove(container: Any) -> None:
        if container is None:
            return
        try:
            container.remove(force=True)
        except Exception:
            pass

    # ---- what applied -------------------------------------------------------

    def applied(self) -> dict[str, Any]:
        """The isolation the engine reports for the running method container."""
        self.container.reload()
        host = self.container.attrs.get("HostConfig") or {}
        config = self.container.attrs.get("Config") or {}
        return {
            "requested": asdict(self.limits),
            "network_mode": host.get("NetworkMode"),
            "read_only_rootfs": bool(host.get("ReadonlyRootfs")),
            "tmpfs": host.get("Tmpfs") or {},
            "cap_drop": host.get("CapDrop") or [],
            "cap_add": host.get("CapAdd") or [],
            "security_opt": host.get("SecurityOpt") or [],
            "privileged": bool(host.get("Privileged")),
            "memory_bytes": host.get("Memory"),
            "memory_swap_bytes": host.get("MemorySwap"),
            "nano_cpus": host.get("NanoCpus"),
            "pids_limit": host.get("PidsLimit"),
            "user": config.get("User"),
            "mounts": [
                {"source": m.get("Source"), "destination": m.get("Destination"), "rw": m.get("RW")}
                for m in self.container.attrs.get("Mounts") or []
            ],
            "orchestrator_connection": "unix socket relay in the container's network namespace",
        }
