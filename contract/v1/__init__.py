"""Stubs generated from proto/nodeground/v1/method_service.proto by `make proto`; do not edit by hand."""
