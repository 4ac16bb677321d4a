"""Data planes, one per memory space, chosen from the operands; one exchange planner for both.

``backend_for(operands)`` looks at where the operands live and returns the backend that moves
and computes on that memory: :class:`HostBackend` (NumPy arrays and CPU torch tensors; MPI
all-to-all exchanges and the CPU FFT/GEMM engines) or, for GPU operands (CuPy arrays, CUDA torch
tensors), ``_gpu.GpuBackend`` (NCCL grouped send/recv and cuweave's cuFFT/cuBLASLt engines).
Both have the same methods: ``unwrap``, ``wrap``, ``dtype_str``, ``exchange``, ``fft_local``,
``matmul_local``, ``allreduce_sum`` (bias gradients) and the few array operations the
distributed matmul needs (``ops_for`` gives the block operations, ``scope`` the device).

Every data movement is an :class:`~._exchange.ExchangePlan` (the planner, in ``_exchange``),
executed with the host plane's block operations and transport here, the GPU plane's in ``_gpu``.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import numpy as np

from .._internal.errors import InvalidOperandError
from .._internal.packages import NUMPY, adapter, adapter_of
from ._exchange import ExchangePlan, mpi_alltoallv

if TYPE_CHECKING:
    pass

__all__ = ["memory_space", "backend_for", "HostBackend", "HOST", "ExchangePlan"]


def memory_space(x) -> str:
    """``'cpu'`` or ``'cuda'`` for a supported array (its package adapter says); raises for
    anything else."""
    space = adapter_of(x).memory_of(x)
    if space is None:
        raise InvalidOperandError(
            "operand must be a NumPy array, a torch tensor or a CuPy array, got "
            f"{type(x).__name__}")
    return space


def backend_for(operands, what: str):
    """The backend serving ``operands`` (all in one memory space)."""
    spaces = {memory_space(x) for x in operands if x is not None}
    if len(spaces) > 1:
        raise InvalidOperandError(f"{what} operands must all live in one memory space, got "
                                  f"{sorted(spaces)}")
    if spaces == {"cuda"}:
        from ._gpu import GPU

        return GPU
    return HOST


class HostBackend:
    """Host arrays: NumPy (and CPU torch tensors, converted without copies)."""

    name = "cpu"

    @staticmethod
    def unwrap(x, name: str = "operand"):
        """``(numpy_array, package)``: the host array as NumPy's, by its package adapter."""
        ad = adapter_of(x)
        try:
            return ad.to_numpy(x), ad.name
        except TypeError:  # e.g. bfloat16, which NumPy has no dtype for
            raise InvalidOperandError(
                f"{name} must have a dtype NumPy holds (host operands), got {x.dtype}") from None

    @staticmethod
    def dtype_str(array) -> str:
        """The dtype as NumPy's ``dtype.str`` (what the processes compare)."""
        return array.dtype.str

    @staticmethod
    def wrap(array: np.ndarray, package: str):
        """``array`` as a host array of ``package`` (sharing its memory)."""
        return adapter(package).from_numpy(array)

    @staticmethod
    def ops_for(x):
        return NUMPY

    @staticmethod
    def scope(x):
        return contextlib.nullcontext()

    @staticmethod
    def exchange(group, plan: ExchangePlan, local: np.ndarray) -> np.ndarray:
        return plan.execute(group, local, NUMPY, mpi_alltoallv)

    @staticmethod
    def allreduce_sum(group, x: np.ndarray) -> None:
        """Sum the contiguous vector ``x`` over the processes, in place (collective): one MPI
        ``Allreduce`` (float16 through float32: MPI has no standard half type)."""
        if group.nranks == 1:
            return
        if x.dtype.itemsize < 4:
            wide = x.astype(np.float32)
            group.allreduce_sum(wide)
            x[...] = wide
        else:
            group.allreduce_sum(x)

    @staticmethod
    def fft_local(kind: str, x: np.ndarray, axes, out_shape, out_dtype, last_axis_parity="even"):
        """One process's share of a distributed transform, on the CPU FFT engine."""
        if x.size == 0 or math.prod(out_shape) == 0:
            return np.zeros(out_shape, out_dtype)
        from .. import fft as _fft

        axes = list(axes)
        if kind == "fft":
            return _fft.fft(x, axes=axes, execution="cpu")
        if kind == "ifft":
            return _fft.ifft(x, axes=axes, execution="cpu")
        if kind == "rfft":
            return _fft.rfft(x, axes=axes, execution="cpu")
        return _fft.irfft(x, axes=axes, execution="cpu",
                          options={"last_axis_parity": last_axis_parity})

    @staticmethod
    def matmul_local(a, b, c, *, alpha, beta, epilog, epilog_inputs):
        from ..linalg.advanced import matmul

        return matmul(a, b, c=c, alpha=alpha, beta=beta, epilog=epilog,
                      epilog_inputs=epilog_inputs, execution="cpu")

    @staticmethod
    def op(x, transpose: bool, conjugate: bool):
        """``x``, ``x.T`` or ``x.conj().T`` (a view where the package allows)."""
        if not transpose:
            return x
        return (x.conj() if conjugate else x).T

    @staticmethod
    def zeros(like, shape, dtype=None, order: str = "C"):
        """A zero array of ``shape``, of ``like``'s dtype unless ``dtype`` is given."""
        return np.zeros(shape, like.dtype if dtype is None else dtype, order=order)

    @staticmethod
    def zeros_like_result(a, b, shape):
        """A Fortran-ordered zero block of ``shape`` in the type of ``a @ b``."""
        return np.zeros(shape, np.result_type(a, b), order="F")

    @staticmethod
    def fortran(x):
        """``x`` Fortran-ordered (no copy when it already is)."""
        return np.asfortranarray(x)


HOST = HostBackend()
