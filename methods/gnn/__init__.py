"""The GNN family (MLP baseline and ten message-passing GNNs), served from one image."""

from methods.gnn.method import APPNP, FAGCN, GAT, GCN, GCNII, GIN, GPRGNN, MLP, GATv2, GraphSAGE, JKNet

__all__ = ["APPNP", "FAGCN", "GAT", "GCN", "GCNII", "GIN", "GPRGNN", "MLP", "GATv2", "GraphSAGE", "JKNet"]
