"""Generated gRPC stubs live in subpackages named after the proto package (nodeground.v1)."""
