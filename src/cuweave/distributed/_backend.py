"""Data planes, one per memory space, chosen from the operands.

``backend_for(operands)`` looks at where the operands live and returns the backend that moves
and computes on that memory: :class:`HostBackend` (NumPy arrays and CPU torch tensors; MPI
all-to-all exchanges and the CPU FFT/GEMM engines) today. GPU operands (CuPy arrays, CUDA torch
tensors, anything exposing ``__cuda_array_interface__``) raise
:class:`~cuweave.distributed.UnsupportedMemorySpaceError` until the GPU backend (cuFFTMp /
cuBLASMp or NCCL all-to-all with per-rank cuFFT/cuBLASLt) plugs in beside this one with the
same methods: ``wrap``, ``unwrap``, ``empty``, ``exchange``, ``fft_local``, ``matmul_local``.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from .._internal.errors import InvalidOperandError
from ._errors import UnsupportedMemorySpaceError

if TYPE_CHECKING:
    from ._distributions import Layout

__all__ = ["memory_space", "backend_for", "HostBackend", "ExchangePlan"]


def memory_space(x) -> str:
    """``'cpu'`` or ``'cuda'`` for a supported array; raises for anything else."""
    if isinstance(x, np.ndarray):
        return "cpu"
    module = type(x).__module__.split(".")[0]
    if module == "torch" and "torch" in sys.modules:
        return "cpu" if x.device.type == "cpu" else "cuda"
    if module == "cupy" or hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    raise InvalidOperandError(
        f"operand must be a NumPy array, a torch tensor or a CuPy array, got {type(x).__name__}")


def backend_for(operands, what: str):
    """The backend serving ``operands`` (all in one memory space)."""
    spaces = {memory_space(x) for x in operands if x is not None}
    if len(spaces) > 1:
        raise InvalidOperandError(f"{what} operands must all live in one memory space, got "
                                  f"{sorted(spaces)}")
    if spaces == {"cuda"}:
        raise UnsupportedMemorySpaceError(
            f"{what}: GPU operands are not supported by cuweave.distributed yet (its GPU data "
            "plane, cuFFTMp/cuBLASMp or NCCL, is not built); pass host arrays (NumPy, CPU "
            "torch), which run on CPU ranks over MPI")
    return HOST


def _axis_index(pos: np.ndarray):
    """A slice when ``pos`` is a contiguous run (cheap views), else the index array."""
    if len(pos) == 0:
        return slice(0, 0)
    if pos[-1] - pos[0] + 1 == len(pos):
        return slice(int(pos[0]), int(pos[-1]) + 1)
    return pos


def _block(positions):
    idx = [_axis_index(p) for p in positions]
    if all(isinstance(i, slice) for i in idx):
        return tuple(idx)
    return np.ix_(*[np.arange(i.start, i.stop) if isinstance(i, slice) else i for i in idx])


class ExchangePlan:
    """What process ``rank`` sends to and receives from every process to go from ``src`` to
    ``dst``. ``src`` must partition the global array; ``dst`` may replicate blocks."""

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

    def execute(self, group, local: np.ndarray) -> np.ndarray:
        itemsize = local.dtype.itemsize
        out = np.empty(self.dst_shape, local.dtype)
        send_parts, send_counts, recv_counts = [], [], []
        for peer, (spos, rpos) in enumerate(zip(self.sends, self.recvs)):
            if peer == self.rank:
                if spos is not None:
                    out[_block(rpos)] = local[_block(spos)]
                send_counts.append(0)
                recv_counts.append(0)
                continue
            if spos is None:
                send_counts.append(0)
            else:
                part = np.ascontiguousarray(local[_block(spos)]).reshape(-1).view(np.uint8)
                send_parts.append(part)
                send_counts.append(part.size)
            recv_counts.append(0 if rpos is None else math.prod(map(len, rpos)) * itemsize)
        if group.nranks > 1:
            send = np.concatenate(send_parts) if send_parts else np.zeros(0, np.uint8)
            recv = np.empty(sum(recv_counts), np.uint8)
            group.alltoallv_bytes(send, send_counts, recv, recv_counts)
            offset = 0
            for rpos, count in zip(self.recvs, recv_counts):
                if count:
                    shape = tuple(map(len, rpos))
                    out[_block(rpos)] = recv[offset:offset + count].view(local.dtype).reshape(shape)
                    offset += count
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
    def unwrap(x):
        """``(numpy_array, package)``."""
        if isinstance(x, np.ndarray):
            return x, "numpy"
        return x.numpy(), "torch"

    @staticmethod
    def wrap(array: np.ndarray, package: str):
        if package == "torch":
            import torch

            return torch.from_numpy(np.ascontiguousarray(array) if not (
                array.flags.c_contiguous or array.flags.f_contiguous) else array)
        return array

    @staticmethod
    def exchange(group, plan: ExchangePlan, local: np.ndarray) -> np.ndarray:
        return plan.execute(group, local)

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


HOST = HostBackend()
