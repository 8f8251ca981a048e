"""RGVT family (named `gvt`, one image): frozen recurrent graph view transformation with a trained head."""

from methods.gvt.method import RGVT

__all__ = ["RGVT"]
