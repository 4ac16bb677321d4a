"""``cuweave.linalg``: linear algebra (``advanced``: cuBLASLt matmul)."""

from . import advanced

__all__ = ["advanced"]
