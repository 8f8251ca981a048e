"""The contract between the orchestrator and the method services, and nothing else.

Both sides import it (orchestrator -> contract <- methods); it never imports either of
them, nor torch: only numpy, grpcio and protobuf. It holds the generated gRPC stubs
(``contract.v1``, from ``proto/nodeground/v1/method_service.proto``), the graph bundle
and probability wire format (``wire``), the search-space types (``space``), the service
handshake (``handshake``), the family manifests (``families``) and the weights catalog
(``weights``).
"""
