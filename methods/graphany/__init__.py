"""GraphAny family (one image): fully-inductive node classification with frozen attention weights."""

from methods.graphany.method import GraphAny

__all__ = ["GraphAny"]
