"""Host ↔ device transfers through pinned buffers, pipelined in chunks.

A :class:`Stager` owns two page-locked chunks. An upload copies chunk *i* of the host array into
one pinned buffer while the DMA engine moves chunk *i-1* from the other; a download mirrors it.
Copies are ordered on the caller's stream; the host side waits only for the buffer it reuses.
"""

from __future__ import annotations

import threading

import numpy as np

from . import cuda

__all__ = ["Stager", "host_bytes"]

_CHUNK = 8 << 20  # bytes per pinned chunk


def host_bytes(arr: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a dense host array in its own memory order (copies if not dense)."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    return arr.reshape(-1, order="A").view(np.uint8)


class Stager:
    """Pinned double buffer for pipelined transfers; call :meth:`close` (or drop) to free it."""

    def __init__(self, chunk: int = _CHUNK):
        self._chunk = chunk
        self._ptrs: list[int] = []
        self._views: list[np.ndarray] = []
        self._events: list[cuda.Event] = []
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        if self._ptrs:
            return
        import ctypes

        for _ in range(2):
            p = cuda.host_alloc(self._chunk)
            self._ptrs.append(p)
            buf = (ctypes.c_uint8 * self._chunk).from_address(p)
            self._views.append(np.frombuffer(buf, dtype=np.uint8))
            self._events.append(cuda.Event(timing=False))

    def upload(self, src: np.ndarray, dst_ptr: int, stream: int) -> None:
        """Copy the bytes of the dense host array ``src`` (own memory order) to ``dst_ptr``."""
        data = host_bytes(src)
        n = data.size
        if n == 0:
            return
        with self._lock:
            self._ensure()
            for i, off in enumerate(range(0, n, self._chunk)):
                k, m = i & 1, min(self._chunk, n - off)
                if i >= 2:
                    self._events[k].synchronize()  # the DMA that used this buffer is done
                np.copyto(self._views[k][:m], data[off:off + m])
                cuda.memcpy_async(dst_ptr + off, self._ptrs[k], m, stream)
                self._events[k].record(stream)

    def download(self, src_ptr: int, dst: np.ndarray, stream: int) -> None:
        """Copy device bytes at ``src_ptr`` into the dense host array ``dst``; returns when done."""
        if not (dst.flags.c_contiguous or dst.flags.f_contiguous):
            tmp = np.empty(dst.shape, dst.dtype, order="C")
            self.download(src_ptr, tmp, stream)
            dst[...] = tmp
            return
        data = dst.reshape(-1, order="A").view(np.uint8)
        n = data.size
        if n == 0:
            return
        with self._lock:
            self._ensure()
            chunks = list(range(0, n, self._chunk))
            for i, off in enumerate(chunks):
                k, m = i & 1, min(self._chunk, n - off)
                cuda.memcpy_async(self._ptrs[k], src_ptr + off, m, stream)
                self._events[k].record(stream)
                if i >= 1:
                    self._drain(chunks[i - 1], 1 - k, data)
            self._drain(chunks[-1], (len(chunks) - 1) & 1, data)

    def _drain(self, off: int, k: int, data: np.ndarray) -> None:
        m = min(self._chunk, data.size - off)
        self._events[k].synchronize()
        np.copyto(data[off:off + m], self._views[k][:m])

    def close(self) -> None:
        with self._lock:
            ptrs, self._ptrs, self._views, self._events = self._ptrs, [], [], []
        for p in ptrs:
            try:
                cuda.host_free(p)
            except Exception:
                pass

    def __del__(self):
        self.close()
