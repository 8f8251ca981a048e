"""Raw gRPC for the upload benchmark: a client-streaming sink of bytes messages, with no NodeGround logic.

``python -m tests.bench.grpc_sink`` serves ``/bench.Sink/Put`` on a free loopback port, prints
``READY_PREFIX <port>`` and serves until its stdin closes (the benchmark ends or dies). Put counts the bytes
it receives and answers the count (8 bytes, little-endian): messages are raw bytes, not protobuf.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent import futures

import grpc

from contract.handshake import READY_PREFIX
from contract.wire import MAX_MESSAGE_BYTES

SERVICE, METHOD = "bench.Sink", "Put"
PATH = f"/{SERVICE}/{METHOD}"


def _count(messages: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
    return sum(len(message) for message in messages).to_bytes(8, "little")


def main() -> None:
    handler = grpc.method_handlers_generic_handler(SERVICE, {METHOD: grpc.stream_unary_rpc_method_handler(_count)})
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=1),
        handlers=(handler,),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"{READY_PREFIX} {port}", flush=True)
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
