"""Node4All family (one image): frozen channel graph transformer encoder with a trained MLP head."""

from methods.node4all.method import Node4All

__all__ = ["Node4All"]
