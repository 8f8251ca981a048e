"""The graph-Transformer family (Polynormer, SGFormer, NAGphormer, GraphGPS), served from one image."""

from methods.graphtransformer.method import GraphGPS, NAGphormer, Polynormer, SGFormer

__all__ = ["GraphGPS", "NAGphormer", "Polynormer", "SGFormer"]
