"""Options, enums and state errors of :mod:`cuweave.linalg` (the generic dense layer).

Every options argument also accepts a ``dict``; validation happens in ``__post_init__`` (no
side effects: nothing is allocated or loaded). The enums carry cuBLAS's C values.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._bindings.cublas import DiagType, FillMode, SideMode
from ..._internal.errors import CuweaveError, InvalidOptionError, InvalidStateError
from ..._internal.memory import check_allocator
from ..._internal.options import check_enum

__all__ = ["SideMode", "FillMode", "DiagType", "MatmulOptions", "DirectSolverOptions",
           "InvalidMatmulState", "InvalidDirectSolverState", "FactorizationError",
           "Factorization"]


class InvalidMatmulState(InvalidStateError):
    """A :class:`~cuweave.linalg.Matmul` used after :meth:`~cuweave.linalg.Matmul.free`."""


class InvalidDirectSolverState(InvalidStateError):
    """A :class:`~cuweave.linalg.DirectSolver` used after its resources were freed."""


class FactorizationError(CuweaveError, RuntimeError):
    """A factorization failed: the matrix is singular (LU) or not positive definite
    (Cholesky). A ``RuntimeError``, as nvmath-python raises.

    Parameters
    ----------
    message : str
        The error's text.
    factorization : str
        ``"LU"`` or ``"Cholesky"``.
    info : numpy.ndarray
        The library's ``info`` per system (``0``: success; ``i > 0``: for LU, ``U[i-1, i-1]``
        is exactly zero; for Cholesky, the leading minor of order ``i`` is not positive
        definite), flattened over the batch.
    batch_indices : tuple
        The indices (in the batch shape, or positions in an explicit batch) that failed;
        ``()`` for a single system.

    The three are kept as attributes of the same names.
    """

    def __init__(self, message: str, factorization: str, info, batch_indices):
        super().__init__(message)
        self.factorization = factorization
        self.info = info
        self.batch_indices = batch_indices


_BLOCKING = (True, "auto")


def _check_common(opts) -> None:
    if opts.logger is not None and not isinstance(opts.logger, logging.Logger):
        raise InvalidOptionError(f"logger must be a logging.Logger or None, got {opts.logger!r}")
    if opts.blocking not in _BLOCKING or (isinstance(opts.blocking, int)
                                          and opts.blocking is not True):
        raise InvalidOptionError(f"blocking must be True or 'auto', got {opts.blocking!r}")
    try:
        check_allocator(opts.allocator)
    except InvalidOptionError as e:  # nvmath-python raises TypeError there
        raise _AllocatorTypeError(str(e)) from None


class _AllocatorTypeError(InvalidOptionError, TypeError):
    """``allocator`` does not follow the memory-manager protocol (also a ``TypeError``)."""


def _check_bool(opts, *names) -> None:
    for name in names:
        v = getattr(opts, name)
        if not isinstance(v, bool | np.bool_):
            raise InvalidOptionError(f"{name} must be a bool, got {v!r}")


@dataclass
class MatmulOptions:
    """Options of :class:`~cuweave.linalg.Matmul` and :func:`~cuweave.linalg.matmul`.

    Attributes
    ----------
    inplace : bool
        Write the result into ``c`` (which must then be given) instead of a new array.
    logger : logging.Logger or None
        Where the phases are logged (default: ``cuweave.linalg``).
    blocking : True or "auto"
        ``"auto"``: GPU work on device operands returns without synchronizing; host operands
        and CPU execution always block.
    allocator : BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync or None
        Where temporary device buffers come from (:mod:`cuweave.memory`; default: the
        operands' package pool, else cuda.core). Results come from the operands' package.
    structured : "auto", "native" or "dense"
        EXT, GPU only: how a triangular, symmetric or Hermitian operand is multiplied:
        ``"native"`` (cuBLAS trmm / symm / hemm, reading one triangle, as nvmath-python) or
        ``"dense"`` (its dense form written by one kernel pass into a scratch matrix, then a
        GEMM: one more n x n buffer per matrix). ``"auto"`` (the default): native for one
        matrix, dense for a batch of matrices of order <= 1024 (one launch and one strided
        batched GEMM instead of a cuBLAS call per matrix). The CPU always runs the structured
        BLAS routine.
    """

    inplace: bool = False
    logger: logging.Logger | None = None
    blocking: bool | str = "auto"
    allocator: Any = None
    structured: str = "auto"

    def __post_init__(self):
        _check_bool(self, "inplace")
        _check_common(self)
        if self.structured not in ("auto", "native", "dense"):
            raise InvalidOptionError(f"structured must be 'auto', 'native' or 'dense', got "
                                     f"{self.structured!r}")


class Factorization:
    """The factorizations :class:`~cuweave.linalg.DirectSolver` performs (EXT)."""

    LU = "LU"
    CHOLESKY = "Cholesky"
    ALL = (LU, CHOLESKY)


@dataclass
class DirectSolverOptions:
    """Options of :class:`~cuweave.linalg.DirectSolver` and
    :func:`~cuweave.linalg.direct_solver`.

    Attributes
    ----------
    handle : int or None
        A cuSOLVER-Dn handle to use for single systems on the GPU (not destroyed by
        cuweave); batched systems run on cuBLAS with cuweave's own handle.
    logger : logging.Logger or None
    blocking : True or "auto"
        Kept for nvmath-python's surface; factorizations always wait for the library's
        ``info`` (a failed factorization is reported before ``solve()``).
    allocator : BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync or None
    inplace_a : bool
        Factorize ``a`` in place (it is overwritten by the factors).
    inplace_b : bool
        Write the solution into ``b``.
    factorization : str
        EXT: ``"LU"`` (partial pivoting, any nonsingular matrix; the default, as nvmath) or
        ``"Cholesky"`` (symmetric / Hermitian positive definite matrices; reads only the
        triangle ``fill_mode`` names, about half the work).
    fill_mode : FillMode
        EXT: the triangle of ``a`` a Cholesky factorization reads (``LOWER`` by default).
    """

    handle: int | None = None
    logger: logging.Logger | None = None
    blocking: bool | str = "auto"
    allocator: Any = None
    inplace_a: bool = False
    inplace_b: bool = False
    factorization: str = "LU"
    fill_mode: Any = FillMode.LOWER

    def __post_init__(self):
        _check_bool(self, "inplace_a", "inplace_b")
        _check_common(self)
        if self.handle is not None and (not isinstance(self.handle, int)
                                        or isinstance(self.handle, bool) or self.handle <= 0):
            raise InvalidOptionError(
                f"handle must be a cuSOLVER-Dn handle (int) or None, got {self.handle!r}")
        f = self.factorization
        match = [x for x in Factorization.ALL if isinstance(f, str) and f.lower() == x.lower()]
        if not match:
            raise InvalidOptionError(
                f"factorization must be one of {list(Factorization.ALL)}, got {f!r}")
        self.factorization = match[0]
        self.fill_mode = check_enum(self.fill_mode, FillMode, "fill_mode")
        if self.fill_mode == FillMode.FULL:
            raise InvalidOptionError("fill_mode must be FillMode.LOWER or FillMode.UPPER, "
                                     f"got {self.fill_mode!r}")


# re-exported names (the enums live with the cuBLAS declarations: their values are the C ones)
SideMode = SideMode
FillMode = FillMode
DiagType = DiagType
