"""GVT family (one image): RGVT, frozen recurrent graph view transformation with a trained head."""

from methods.gvt.method import RGVT

__all__ = ["RGVT"]
