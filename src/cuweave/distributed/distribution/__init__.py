"""Distributions of arrays across processes and redistribution between them.

``Slab`` (one axis partitioned, uneven splits allowed), ``Box`` (each process's box of a custom
tiling), ``BlockCyclic`` / ``BlockNonCyclic`` over a ``ProcessGrid`` (PBLAS), and
:func:`redistribute` / :class:`Redistribute` to move data from one to another.
"""

from .._distributions import BlockCyclic, BlockNonCyclic, Box, Distribution, ProcessGrid, Slab
from .._errors import BindDistributionError, ConvertDistributionError
from ._redistribute import Redistribute, RedistributeOptions, redistribute

__all__ = [
    "ProcessGrid",
    "Distribution",
    "Slab",
    "Box",
    "BlockCyclic",
    "BlockNonCyclic",
    "BindDistributionError",
    "ConvertDistributionError",
    "RedistributeOptions",
    "Redistribute",
    "redistribute",
]
