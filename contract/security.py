"""Who may call a method service beyond loopback: TLS and a shared token, gRPC's own credentials.

Off by default: a service on loopback (embedded processes, `make up`'s 127.0.0.1 ports, the
sandbox) speaks plaintext. On a network others share (a Swarm overlay, a cluster) the service
serves TLS only and, with a token, refuses every call that does not carry it. Both sides read
the same environment, so compose files, the Swarm stack and SLURM jobs hand it on:

- ``NODEGROUND_TLS_CERT`` / ``NODEGROUND_TLS_KEY``: the service's certificate chain and key (PEM
  files). Set, the service listens with TLS only.
- ``NODEGROUND_TLS_CA``: the certificate a client trusts (PEM file). Set, clients dial TLS.
- ``NODEGROUND_TLS_NAME``: the name the certificate was issued for, checked instead of the
  dialled address (replicas behind a DNS name are dialled by IP).
- ``NODEGROUND_TOKEN_FILE``: a file holding the shared token. The service answers only calls
  that carry it (``authorization: Bearer <token>``, else UNAUTHENTICATED); clients send it.
  gRPC sends call credentials over TLS only, so a token needs TLS on both sides.

Health (``grpc.health.v1``) needs TLS but no token: probes (Docker, Kubernetes) carry none, and
it tells nothing about a method.
"""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from contract.files import MIB, FileRefused, read_bounded

CERT_ENV, KEY_ENV, CA_ENV, NAME_ENV, TOKEN_FILE_ENV = (
    "NODEGROUND_TLS_CERT",
    "NODEGROUND_TLS_KEY",
    "NODEGROUND_TLS_CA",
    "NODEGROUND_TLS_NAME",
    "NODEGROUND_TOKEN_FILE",
)
ENV_NAMES = (CERT_ENV, KEY_ENV, CA_ENV, NAME_ENV, TOKEN_FILE_ENV)
HEALTH_PREFIX = "/grpc.health.v1.Health/"
_TOKEN = re.compile(r"[\x21-\x7e]+")  # what an HTTP/2 header value may carry
PEM_LIMIT = MIB  # a certificate chain or key: a few KiB; the same reader refuses a FIFO, a device or a huge file
TOKEN_LIMIT = 64 << 10


class SecurityError(ValueError):
    """The TLS or token settings are incomplete or unreadable (one line, names the setting)."""


def _read(env: Mapping[str, str], name: str, limit: int = PEM_LIMIT) -> bytes | None:
    """The file a variable names, a regular file of at most ``limit`` bytes (``contract.files``); None when unset."""
    value = env.get(name)
    if not value:
        return None
    try:
        return read_bounded(value, limit, name)
    except FileRefused as exc:
        raise SecurityError(str(exc)) from None


@dataclass(frozen=True)
class Security:
    """One side's settings; the empty one is plaintext without a token."""

    cert: bytes | None = None  # service: certificate chain (PEM)
    key: bytes | None = None  # service: private key (PEM)
    ca: bytes | None = None  # client: certificate to trust (PEM)
    server_name: str | None = None  # client: name the certificate was issued for
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Security:
        env = os.environ if env is None else env
        cert, key, ca = _read(env, CERT_ENV), _read(env, KEY_ENV), _read(env, CA_ENV)
        if bool(cert) != bool(key):
            raise SecurityError(
                f"{CERT_ENV} and {KEY_ENV} go together: set both (a service's TLS certificate and key) or neither"
            )
        token_bytes = _read(env, TOKEN_FILE_ENV, TOKEN_LIMIT)
        token = token_bytes.decode("utf-8", "replace").strip() if token_bytes is not None else None
        if token_bytes is not None and not _TOKEN.fullmatch(token or ""):
            raise SecurityError(
                f"{TOKEN_FILE_ENV}={env[TOKEN_FILE_ENV]}: a token is one line of printable ASCII without spaces (e.g. "
                "`openssl rand -hex 32`)"
            )
        if token and not (cert or ca):
            raise SecurityError(
                f"{TOKEN_FILE_ENV} needs TLS (gRPC sends a token only over TLS): set {CA_ENV} (client) or "
                f"{CERT_ENV}/{KEY_ENV} (service)"
            )
        return cls(cert=cert, key=key, ca=ca, server_name=env.get(NAME_ENV) or None, token=token)

    # ---- client side -------------------------------------------------------

    def channel(self, endpoint: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A channel to ``endpoint``: TLS (trusting ``ca``, sending the token) when ``ca`` is set, else plaintext."""
        if self.ca is None:
            return grpc.insecure_channel(endpoint, options=list(options))
        credentials = grpc.ssl_channel_credentials(root_certificates=self.ca)
        if self.token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(self.token)
            )
        named = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(endpoint, credentials, options=[*options, *named])

    # ---- service side ------------------------------------------------------

    @property
    def serves_tls(self) -> bool:
        return self.cert is not None

    def bind(self, server: grpc.Server, address: str) -> int:
        """Add the listening port (TLS when a certificate is set); the port bound, 0 on failure."""
        if self.cert is None or self.key is None:
            return server.add_insecure_port(address)
        return server.add_secure_port(address, grpc.ssl_server_credentials([(self.key, self.cert)]))

    def interceptors(self) -> list[grpc.ServerInterceptor]:
        return [TokenCheck(self.token)] if self.token else []

    def loopback_client(self) -> Security:
        """How the service's own probe dials it on loopback: trusting its own certificate, no token.

        Health needs no token.
        """
        return Security(ca=self.cert, server_name=self.server_name) if self.cert else Security()


class TokenCheck(grpc.ServerInterceptor):
    """Refuses, with UNAUTHENTICATED, every call but health that lacks ``authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None or details.method.startswith(HEALTH_PREFIX):
            return handler
        sent = dict(details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(str(sent).encode(), self._expected):
            return handler

        def refuse(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "this service requires its token (NODEGROUND_TOKEN_FILE on the client)"
            )

        kinds = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
        return handler._replace(**{kind: refuse for kind in kinds if getattr(handler, kind) is not None})
