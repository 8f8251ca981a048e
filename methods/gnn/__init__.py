"""The GNN family (MLP baseline and message-passing GNNs), served from one image."""

from methods.gnn.models import GCN, MLP

METHODS = [MLP, GCN]
