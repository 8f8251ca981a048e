"""GraphPFN family (one image): LimiX-16M in context on the training nodes, with frozen graph adapters."""

from methods.graphpfn.method import GraphPFN

__all__ = ["GraphPFN"]
