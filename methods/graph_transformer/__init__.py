"""The graph-Transformer family (Polynormer, SGFormer, NAGphormer, GraphGPS), served from one image."""

from methods.graph_transformer.models import SGFormer, GraphGPS, NAGphormer, Polynormer

