"""NodePFN family (one image): a frozen PFN transformer with message passing, in context on the training nodes."""

from methods.nodepfn.method import NodePFN

__all__ = ["NodePFN"]
