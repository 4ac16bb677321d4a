"""The exchange planner of cuweave.distributed: :class:`ExchangePlan` and its transports' helpers.

Every data movement is an :class:`ExchangePlan`: which global indices this process sends to and
receives from every other, computed once from two layouts. Executing it is parametrized by the
block operations (a package adapter: NumPy's on the host plane, torch's or CuPy's on the GPU
plane) and by the transport (:func:`mpi_alltoallv` on the host; NCCL in ``_gpu``): one planner,
two transports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._internal.packages import NUMPY

if TYPE_CHECKING:
    from ._distributions import Layout

__all__ = ["ExchangePlan", "axis_indices", "copy_block", "mpi_alltoallv"]


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
