"""Method family "ephris": Ephris served from the upstream `ephris` package; its own pins are requirements.txt
(CPU, over the service runtime) and requirements-cuda.txt (CUDA, upstream's exactly)."""

from methods.ephris.method import Ephris

__all__ = ["Ephris"]
