"""Data planes, one per memory space, chosen from the operands; one exchange planner for both.

``backend_for(operands)`` looks at where the operands live and returns the backend that moves
and computes on that memory: :class:`HostBackend` (NumPy arrays and CPU torch tensors; MPI
all-to-all exchanges and the CPU FFT/GEMM engines) or, for GPU operands (CuPy arrays, CUDA torch
tensors), ``_gpu.GpuBackend`` (NCCL grouped send/recv and cuweave's cuFFT/cuBLASLt engines).
Both have the same methods: ``unwrap``, ``wrap``, ``dtype_str``, ``exchange``, ``fft_local``,
``matmul_local``, ``allreduce_sum`` (bias gradients) and the few array operations the
distributed matmul needs (``ops_for`` gives the block operations, ``scope`` the device).

Every data movement is an :class:`ExchangePlan`: which global indices this process sends to and
receives from every other, computed once from two layouts. Executing it is parametrized by the
block operations (the package adapters': NumPy's here; on GPU operands torch's or CuPy's)
and by the transport (:func:`mpi_alltoallv` here; NCCL in ``_gpu``): one planner, two
transports.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import numpy as np

from .._internal.errors import InvalidOperandError
from .._internal.packages import NUMPY, adapter, adapter_of

if TYPE_CHECKING:
    from ._distributions import Layout

__all__ = ["memory_space", "backend_for", "HostBackend", "ExchangePlan", "mpi_alltoallv"]


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


def _axis_index(pos: np.ndarray):
    """A slice when ``pos`` is a contiguous run (cheap views), else the index array."""
    if len(pos) == 0:
        return slice(0, 0)
    if pos[-1] - pos[0] + 1 == len(pos):
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return pos


def axis_indices(positions) -> list:
    """Per axis: a ``slice`` for a contiguous run of positions, else the int64 position array."""
    return [_axis_index(np.asarray(p, dtype=np.int64)) for p in positions]


def _all_slices(idx) -> bool:
    return all(isinstance(i, slice) for i in idx)


def copy_block(ops, out, out_idx, x, x_idx) -> None:
    """``out[out_idx] = x[x_idx]`` with ``ops``' indices (a view when both are slices)."""
    sliced = _all_slices(out_idx) and _all_slices(x_idx)
    ops.put(out, out_idx, x[x_idx] if sliced else ops.take(x, x_idx))


def mpi_alltoallv(group, sends, recvs) -> None:
    """The host transport: one ``alltoallv`` of bytes over the process group (collective).

    ``sends``/``recvs`` are ``[(peer, array)]`` in increasing peer order; sent arrays are
    C-contiguous, received ones are filled (they may be strided views).
    """
    n = group.nranks
    send_counts, recv_counts, parts = [0] * n, [0] * n, []
    for peer, block in sends:
        part = block.reshape(-1).view(np.uint8)
        parts.append(part)
        send_counts[peer] = part.size
    for peer, block in recvs:
        recv_counts[peer] = block.size * block.dtype.itemsize
    send = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    recv = np.empty(sum(recv_counts), np.uint8)
    group.alltoallv_bytes(send, send_counts, recv, recv_counts)
    offset = 0
    for peer, block in recvs:
        count = recv_counts[peer]
        block[...] = recv[offset:offset + count].view(block.dtype).reshape(block.shape)
        offset += count


class ExchangePlan:
    """What process ``rank`` sends to and receives from every process to go from ``src`` to
    ``dst``. ``src`` must partition the global array; ``dst`` may replicate blocks.

    Attributes
    ----------
    sends, recvs : list
        Per peer: the positions (per axis, in this process's source / destination block) of
        the elements sent to / received from that peer, or ``None``.
    dst_shape : tuple of int
        This process's destination block shape.
    """

    def __init__(self, src: Layout, dst: Layout, rank: int):
        if src.global_shape != dst.global_shape:
            raise ValueError(f"layouts of different global shapes: {src.global_shape} vs "
                             f"{dst.global_shape}")
        self.rank = rank
        self.dst_shape = dst.local_shape(rank)
        self.sends, self.recvs = [], []
        mine_src, mine_dst = src.sets[rank], dst.sets[rank]
        for peer in range(len(src.sets)):
            self.sends.append(_overlap(mine_src, dst.sets[peer], 1))
            self.recvs.append(_overlap(src.sets[peer], mine_dst, 2))
        self._indices: dict = {}

    @property
    def peers(self) -> list[int]:
        """The other processes this one exchanges any data with."""
        return [p for p, (s, r) in enumerate(zip(self.sends, self.recvs))
                if p != self.rank and (s is not None or r is not None)]

    def indices(self, ops, like) -> list:
        """Per peer ``(send index, receive index)`` in ``ops``' form (built once per key)."""
        key = (ops.name, ops.device_of(like))
        idx = self._indices.get(key)
        if idx is None:
            idx = self._indices[key] = [
                tuple(None if p is None else ops.block_index(axis_indices(p), like)
                      for p in (s, r)) for s, r in zip(self.sends, self.recvs)]
        return idx

    def execute(self, group, local, ops=NUMPY, transport=mpi_alltoallv):
        """This process's destination block from its source block ``local`` (collective).

        ``ops`` supplies the block operations (a package adapter: NumPy's, or the GPU package's:
        allocation, packing, unpacking) and
        ``transport(group, sends, recvs)`` moves the packed blocks; it is called on every
        process when there is more than one, even with nothing to move.
        """
        out = ops.new_block(local, self.dst_shape)
        sends, recvs, pending = [], [], []
        for peer, (sidx, ridx) in enumerate(self.indices(ops, local)):
            if peer == self.rank:
                if sidx is not None:
                    copy_block(ops, out, ridx, local, sidx)
                continue
            if sidx is not None:
                sends.append((peer, ops.take(local, sidx)))
            if ridx is not None:
                target = ops.region(out, ridx)
                if target is None:
                    target = ops.new_block(local, tuple(map(len, self.recvs[peer])))
                    pending.append((ridx, target))
                recvs.append((peer, target))
        if group.nranks > 1:
            transport(group, sends, recvs)
        for ridx, block in pending:
            ops.put(out, ridx, block)
        return out


def _overlap(a_sets, b_sets, which):
    """Positions (in ``a`` when ``which`` is 1, in ``b`` when 2) of the common global indices,
    per axis; ``None`` when the blocks do not meet."""
    out = []
    for a, b in zip(a_sets, b_sets):
        _, ia, ib = np.intersect1d(a, b, assume_unique=True, return_indices=True)
        if len(ia) == 0:
            return None
        out.append(ia if which == 1 else ib)
    return out


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
