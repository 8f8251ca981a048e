"""NodeGround orchestrator: datasets, splits, sweeps over method services, records and analysis."""

__version__ = "0.1.0"
