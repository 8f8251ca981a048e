"""How a launcher and a method service find each other: the names both sides must agree on.

A service started with ``--port 0`` prints ``READY_PREFIX <port>`` as its first stdout
line; a launcher sets ``PARENT_PID_ENV`` so the service exits with it, and ``GRAPH_DIR_ENV`` to a
directory of its own where the service listens for graphs handed over as sealed memfds (AttachGraph); an image
serves on ``SERVICE_PORT`` and carries the labels that container discovery reads; the gRPC health
service answers for every name in ``HEALTH_SERVICES``.
"""

from __future__ import annotations

READY_PREFIX = "NODEGROUND_LISTENING"
PARENT_PID_ENV = "NODEGROUND_PARENT_PID"
GRAPH_DIR_ENV = "NODEGROUND_GRAPH_DIR"
DEVICE_ENV = "NODEGROUND_DEVICE"  # the torch device a service computes on (default: the first GPU, else the CPU)
SERVICE_PORT = 50051
FAMILY_LABEL = "nodeground.family"
PORT_LABEL = "nodeground.port"
HEALTH_SERVICES = ("", "nodeground.v1.MethodService")
