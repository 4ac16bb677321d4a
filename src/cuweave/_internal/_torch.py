"""The torch adapter: tensors in through their own metadata, results from torch's pool."""

from __future__ import annotations

import functools
import sys

import numpy as np

from .adapters import (
    Adapter,
    _all_slices,
    _perm_strides,
    _shape_perm,
    _slices_then_full,
    inverse_perm,
)
from .arrays import Operand, c_strides
from .dtypes import numpy_dtype
from .errors import InvalidOperandError
from .memory import MemoryPointer
from .registry import ADAPTERS
from .streams import Stream
from .wrapping import probe_torch, wrap_torch

__all__ = ["TorchAdapter", "TORCH"]


class TorchAdapter(Adapter):
    name = "torch"
    owns_stream = True
    block_ops = True
    #: torch tensors live in host or device memory (NumPy's are host, CuPy's device arrays)
    device_memory = None
    #: device type of the tensors results are made on (the CPU-only fakes set ``"cpu"``)
    device_type = "cuda"

    @staticmethod
    def _torch():
        return sys.modules["torch"]

    def wrap(self, x, name: str) -> Operand:
        return wrap_torch(x, name)

    def host_array(self, op: Operand) -> np.ndarray:
        x = op.obj
        if op.conj:
            x = x.conj()  # the conjugate view of a lazy-conj tensor is its memory
        if op.dtype not in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32"):
            return x.detach().numpy()
        torch = self._torch()
        raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[op.itemsize]
        return x.detach().view(raw).numpy().view(numpy_dtype(op.dtype))

    def probe(self, x):
        return probe_torch(x)

    @staticmethod
    def plain_pointer(x):
        """``x``'s data pointer where its operand record would hold ``x`` itself (no lazy
        negation or conjugation to resolve), else ``None`` (``Matmul.reset_operands_unchecked``
        then wraps it)."""
        try:
            if x.is_neg() or x.is_conj():
                return None
            return x.data_ptr()
        except AttributeError:  # not a tensor: wrapping reports it
            return None

    def stream_getter(self, device_id: int):
        torch = self._torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
        if raw is not None:
            return functools.partial(raw, device_id)
        return lambda: torch.cuda.current_stream(device_id).cuda_stream

    def current_stream(self, device_id: int) -> Stream:
        s = self._torch().cuda.current_stream(device_id)
        return Stream(s.cuda_stream, s)

    def stream_of(self, obj) -> Stream | None:
        if hasattr(obj, "cuda_stream"):
            return Stream(obj.cuda_stream, obj)
        return None

    def stream_context(self, stream: int, device_id: int):
        torch = self._torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # no Stream object made
        current = raw(device_id) if raw is not None else (
            torch.cuda.current_stream(device_id).cuda_stream)
        if current == stream:
            return None
        s = (torch.cuda.default_stream(device_id) if stream == 0 else
             torch.cuda.ExternalStream(stream, device=torch.device("cuda", device_id)))
        return torch.cuda.stream(s)

    def allocate_bytes(self, nbytes, device_id, stream) -> MemoryPointer:
        torch = self._torch()
        t = self.on_stream(stream, device_id, torch.empty, nbytes, dtype=torch.uint8,
                           device=torch.device("cuda", device_id))
        ptr = MemoryPointer(t.data_ptr(), nbytes)
        ptr._owner = t  # freed when the pointer (and the tensor) are dropped
        return ptr

    def _dtype(self, dtype: str):
        try:
            return getattr(self._torch(), dtype)
        except AttributeError as e:
            raise InvalidOperandError(f"dtype must be supported by torch, got {dtype!r}") from e

    def empty(self, shape, dtype, perm, *, device_id, stream=0, allocator=None) -> Operand:
        torch = self._torch()
        alloc_shape = tuple(shape[p] for p in perm)
        inv = inverse_perm(perm)
        if device_id is None:
            x = torch.empty(alloc_shape, dtype=self._dtype(dtype))
        else:  # from torch's pool, ordered on ``stream``
            x = self.on_stream(stream, device_id, torch.empty, alloc_shape,
                               dtype=self._dtype(dtype),
                               device=torch.device(self.device_type, device_id))
        return self.wrap(x.permute(inv), "result")

    def result_allocator(self, shape, dtype, perm, device_id):
        made = self.result_maker(shape, dtype, perm, device_id)
        if made is None:  # the generic allocator raises the typed error on use
            return super().result_allocator(shape, dtype, perm, device_id)
        new, on_stream = made[0], self.on_stream

        def alloc(stream, foreign=False):
            # another stream: the same maker with that stream made current (no wrapping)
            x = on_stream(stream, device_id, new) if foreign else new()
            return x, x.data_ptr()

        return alloc

    def result_maker(self, shape, dtype, perm, device_id):
        torch = self._torch()
        tdtype = getattr(torch, dtype, None)
        if tdtype is None:
            return None
        shape, perm = _shape_perm(shape, perm)
        kw = {"dtype": tdtype, "device": torch.device(self.device_type, device_id)}
        if perm == tuple(range(len(shape))):
            # empty_like of a one-element tensor expanded to the shape (not dense, so the new
            # tensor is C-contiguous) parses one argument: ~0.5 µs cheaper than torch.empty
            new = functools.partial(torch.empty_like, torch.empty((), **kw).expand(shape))
            if new().stride() != c_strides(shape):  # pragma: no cover - another torch's rule
                new = functools.partial(torch.empty, *shape, **kw)
        else:  # one call instead of empty + permute
            new = functools.partial(torch.empty_strided, shape, _perm_strides(shape, perm),
                                    **kw)
        return new, torch.Tensor.data_ptr  # the method itself: no attribute lookup per call

    def permute(self, obj, axes):
        return obj.permute(axes)

    def from_numpy(self, arr):
        try:
            return self._torch().from_numpy(arr)
        except ValueError:  # negative strides, which torch does not take: a dense copy
            return self._torch().from_numpy(np.ascontiguousarray(arr))

    def memory_of(self, x) -> str:
        return "cpu" if x.device.type == "cpu" else "cuda"

    def to_numpy(self, x) -> np.ndarray:
        return x.numpy()

    # torch's ExternalStream(0) is a stream of its own, not the null stream (H200 2026-12-01:
    # a copy queued there raced the library call on stream 0): every op below runs through
    # stream_context, which takes 0 as torch's default stream
    def broadcast_into(self, dst, src, shape, stream, device_id) -> None:
        self.on_stream(stream, device_id, lambda: dst.copy_(src.expand(shape)))

    def dense_copy(self, obj, shape, order, stream, device_id):
        def copy():
            x = obj.expand(tuple(shape))
            if order == "F":
                return x.transpose(-1, -2).contiguous().transpose(-1, -2)
            return x.contiguous()

        return self.on_stream(stream, device_id, copy)

    def scale_(self, obj, scale, stream, device_id) -> None:
        if not obj.is_cuda:
            obj *= scale
            return
        self.on_stream(stream, device_id, obj.mul_, scale)

    # ---- blocks (see Adapter) --------------------------------------------------------------
    def device_of(self, x):
        return x.device.index

    def device_count(self) -> int:
        cuda = self._torch().cuda
        return cuda.device_count() if cuda.is_available() else 0

    def device_scope(self, device_id: int):
        return self._torch().cuda.device(device_id)

    def new_array(self, shape, dtype, device_id, *, order="C", zeros=False):
        torch, shape = self._torch(), tuple(shape)
        if not isinstance(dtype, torch.dtype):
            dtype = self._dtype(np.dtype(dtype).name)
        new = torch.zeros if zeros else torch.empty
        where = "cpu" if device_id is None else torch.device(self.device_type, device_id)
        kw = {"dtype": dtype, "device": where}
        if order != "F":
            return new(shape, **kw)
        t = new(shape[::-1], **kw)
        return t.permute(*range(t.ndim - 1, -1, -1))

    def block_index(self, idx, like) -> tuple:
        torch = self._torch()
        return tuple(i if isinstance(i, slice) else torch.as_tensor(i, device=like.device)
                     for i in idx)

    def take(self, x, idx):
        y = x[_slices_then_full(idx)]
        for axis, i in enumerate(idx):
            if not isinstance(i, slice):
                y = y.index_select(axis, i)
        return y.contiguous()

    def region(self, out, idx):
        v = out[idx] if _all_slices(idx) else None
        return v if v is not None and v.is_contiguous() else None

    def put(self, out, idx, block) -> None:
        if _all_slices(idx):
            out[idx].copy_(block)
            return
        torch, n = self._torch(), len(idx)
        grid = [(torch.arange(i.start, i.stop, device=out.device) if isinstance(i, slice) else i)
                .reshape([-1 if a == axis else 1 for a in range(n)]) for axis, i in enumerate(idx)]
        out[tuple(grid)] = block

    def pointer(self, x) -> int:
        return x.data_ptr()

    def matrix_op(self, x, transpose: bool, conjugate: bool):
        """``x``, ``x.T`` or ``x.conj().T`` of a matrix (the conjugate resolved)."""
        if not transpose:
            return x
        return x.mT.conj().resolve_conj() if conjugate else x.mT


    # ---- array operations (the NumPy-style FFT layer; see packages.NamespaceArrayOps) -----
    array_ops = True

    def kind_size(self, x):
        dt = x.dtype
        kind = ("c" if dt.is_complex else "f" if dt.is_floating_point else
                "b" if dt == self._torch().bool else "i")
        return kind, dt.itemsize

    def dtype_label(self, x) -> str:
        return str(x.dtype).rpartition(".")[2]

    def astype(self, x, name):
        return x.to(getattr(self._torch(), name))

    def new_like(self, shape, name, like, zeros: bool = False):
        torch = self._torch()
        return (torch.zeros if zeros else torch.empty)(shape, dtype=getattr(torch, name),
                                                       device=like.device)

    def conj(self, x):
        return self._torch().conj_physical(x)

    def conj_(self, x):
        return x.conj_physical_()

    def to_back(self, x, axes):
        last = list(range(x.ndim - len(axes), x.ndim))
        return self._torch().movedim(x, axes, last).contiguous()

    def from_back(self, y, axes):
        last = list(range(y.ndim - len(axes), y.ndim))
        return self._torch().movedim(y, last, axes)

    def copy_into(self, out, y):
        out.copy_(y)
        return out

    def fft_shift(self, x, axes, name: str):
        return getattr(self._torch().fft, name)(x, dim=axes)


TORCH = TorchAdapter()
# registered here, where the class is defined (``packages`` imports this module at its end)
ADAPTERS["torch"] = TORCH
