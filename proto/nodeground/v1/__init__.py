"""Stubs generated from method_service.proto by `make proto`; do not edit by hand."""
