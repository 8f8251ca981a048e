"""Reaching method services: gRPC client, embedded subprocesses, running containers."""
