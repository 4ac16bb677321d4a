"""Host helpers for :mod:`cuweave.linalg.advanced` (``helpers.matmul``: FP4 packing and the
MXFP8/NVFP4 block-scale layouts). Imports no torch until a helper is called."""

from . import matmul

__all__ = ["matmul"]
