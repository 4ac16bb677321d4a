"""Collective problem specification shared by redistribute, FFT and matmul.

Each process describes its own inputs (checked locally); :func:`~._runtime.agree` gathers the
descriptions, and every process then runs the same cross-process checks on the same gathered
data, so a bad input on any process raises on all of them before any data moves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._internal.errors import InvalidOperandError, InvalidOptionError
from .._internal.options import coerce_options  # noqa: F401 - the one coercion, re-exported
from ._backend import backend_for
from ._distributions import Box, Distribution, Layout
from ._errors import BindDistributionError

__all__ = ["coerce_distribution", "LocalOperand", "local_operand", "check_same", "resolve_layout",
           "coerce_options", "dtype_name", "check_same_space"]


def coerce_distribution(value, name: str) -> Distribution:
    """A :class:`Distribution`, or a ``(lower, upper)`` pair taken as a :class:`Box`."""
    if isinstance(value, Distribution):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        try:
            return Box.coerce(value, name)
        except (InvalidOptionError, TypeError):
            pass
    raise InvalidOptionError(
        f"{name} must be a Distribution (Slab, Box, BlockCyclic, BlockNonCyclic) or a "
        f"(lower, upper) box, got {value!r}")


@dataclasses.dataclass
class LocalOperand:
    """One process's view of an operand: the array, its package and its description."""

    array: object
    package: str
    shape: tuple
    dtype: str
    backend: object = dataclasses.field(repr=False, default=None)

    def describe(self):
        """``(shape, dtype, package, memory space)``: what the processes compare."""
        return (self.shape, self.dtype, self.package, self.backend.name)


def local_operand(x, name: str, what: str) -> LocalOperand:
    """Check ``x`` (an array in a supported package, on this process's device) and describe it."""
    if x is None:
        raise InvalidOperandError(f"{name} must be an array, got None")
    backend = backend_for([x], what)
    arr, package = backend.unwrap(x, name)
    return LocalOperand(arr, package, tuple(arr.shape), backend.dtype_str(arr), backend)


def dtype_name(dtype: str) -> str:
    """NumPy's name of a dtype string (``'<c8'`` -> ``'complex64'``), or the string itself when
    NumPy has no such dtype (``'bfloat16'`` of a torch tensor)."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return dtype


def check_same_space(descs: list, name: str = "operand") -> None:
    """Raise unless every process's operand lives in one memory space (CPU or GPU)."""
    check_same(descs, 3, f"{name} memory space ('cpu' or 'cuda')")


def check_same(gathered: list, index: int, name: str) -> None:
    """Raise unless item ``index`` of every process's description is the same."""
    first = gathered[0][index]
    for rank, desc in enumerate(gathered):
        if desc[index] != first:
            raise InvalidOperandError(
                f"{name} must be the same on every process: process 0 has {first!r}, "
                f"process {rank} has {desc[index]!r}")


def resolve_layout(name: str, dists: list, local_shapes: list, nranks: int,
                   global_shape=None) -> Layout:
    """The layout of an operand from every process's distribution and local shape.

    ``global_shape`` is inferred from the local shapes when not given; the local shapes must
    then be those the distribution assigns, and the processes' blocks must tile the array.
    """
    first = dists[0]
    if isinstance(first, Box):
        if not all(isinstance(d, Box) for d in dists):
            raise InvalidOptionError(f"{name} must be a Box on every process or on none")
        ndims = {d.ndim for d in dists}
        if len(ndims) != 1:
            raise BindDistributionError(f"{name} boxes must have one dimensionality, got "
                                        f"{sorted(ndims)}")
        if global_shape is None:
            global_shape = first._infer_global_shape(local_shapes, nranks, boxes=dists)
        layout = Layout.of(first, tuple(global_shape), nranks, boxes=dists)
    else:
        for rank, d in enumerate(dists):
            if d != first:
                raise InvalidOptionError(
                    f"{name} must be the same on every process: process 0 has {first!r}, "
                    f"process {rank} has {d!r}")
        if global_shape is None:
            first._check_ndim(len(local_shapes[0]))
            global_shape = first._infer_global_shape(local_shapes, nranks)
        layout = Layout.of(first, tuple(global_shape), nranks)
    if local_shapes is not None:
        for rank, shape in enumerate(local_shapes):
            if tuple(shape) != layout.local_shape(rank):
                raise BindDistributionError(
                    f"{name}: the operand of process {rank} has shape {tuple(shape)}, but the "
                    f"distribution gives it {layout.local_shape(rank)} of the global shape "
                    f"{layout.global_shape}")
    layout.check_partition(name)
    return layout
