"""G2T-FM family (one image): graph-to-table features fed to a frozen TabPFN-v2 in context."""

from methods.g2tfm.method import G2TFM

__all__ = ["G2TFM"]
