"""What a host and a port may be, for both sides: a service's ``--host`` and an orchestrator's ``--endpoint``.

gRPC takes a port modulo 2**16 (47400 + 65536 listens on 47400) and fails late, with a traceback, on a host such as
``999.1.1.1``. So both are checked before anything is bound or dialled, by one rule: a port in 1..65535 (0, "any free
port", only where a service binds), and a host that is an IPv4 address (four numbers 0-255), an IPv6 address (in
brackets inside an ``address:port``), or a DNS name (labels of letters, digits and hyphens, at most 63 characters
each and 253 in all, the last one not all digits).
"""

from __future__ import annotations

import ipaddress
import re

from contract.errors import UserError

MAX_PORT = 65535
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


class AddressError(ValueError, UserError):
    """A host or port that no service can listen on or be dialled at; the message says which and why."""


def check_host(host: str, what: str = "host") -> str:
    """``host`` (without brackets) when it is an IPv4 or IPv6 address or a DNS name; AddressError otherwise."""
    text = host.strip()
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    labels = text.rstrip(".").split(".")
    if (
        not text
        or len(text) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or labels[-1].isdigit()  # 999.1.1.1: numbers only, so an IPv4 address, and not a valid one
    ):
        raise AddressError(
            f"{what} {host[:80]!r} is neither an IP address (IPv4: four numbers 0-255) nor a host name (letters, "
            "digits, '-' and '.')"
        )
    return text


def check_port(port: int | str, what: str = "port", allow_any: bool = False) -> int:
    """``port`` as an integer in 1..65535 (0 too with ``allow_any``: the OS picks one); AddressError otherwise."""
    low = 0 if allow_any else 1
    text = str(port).strip()
    if not text.isdigit() or not low <= int(text) <= MAX_PORT:
        raise AddressError(f"{what} {str(port)[:40]!r} must be an integer in {low}..{MAX_PORT}")
    return int(text)


def split_address(address: str, label: str | None = None) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets) as (host, port), both checked; AddressError otherwise, its message
    starting with ``label`` (default: the address)."""
    label = label or f"address {address[:80]!r}"
    host, colon, port = address.strip().rpartition(":")
    if not colon or not host:
        raise AddressError(f"{label} must look like HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1]
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise AddressError(f"{label}: {inner[:60]!r} in brackets is not an IPv6 address") from None
        host = inner
    elif ":" in host:
        raise AddressError(f"{label}: write an IPv6 host in brackets, as [::1]:50051")
    else:
        check_host(host, f"{label}: host")
    return host, check_port(port, f"{label}: port")
