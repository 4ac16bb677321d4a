"""The adapter base class (generic DLPack / CUDA-array-interface producers), NumPy's adapter
and the helpers adapters share.

An adapter owns everything that differs between array packages (see :mod:`.packages`, the
front every engine uses). torch's, CuPy's and JAX's adapters subclass :class:`Adapter` in
``_torch.py``, ``_cupy.py`` and ``_jax.py``; every adapter registers in
:data:`.registry.ADAPTERS` when its module is imported.
"""

from __future__ import annotations

import math

import numpy as np

from . import pinned as _pinned
from .arrays import DeviceArray, Operand, c_strides
from .dtypes import numpy_dtype
from .errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    UnsupportedLayoutError,
    too_large,
)
from .memory import MemoryPointer
from .registry import ADAPTERS
from .streams import Stream
from .wrapping import wrap_cai, wrap_dlpack, wrap_numpy

__all__ = ["Adapter", "NamespaceArrayOps", "NumpyAdapter", "NUMPY", "GENERIC", "inverse_perm"]

_EXPECTED = ("a NumPy or CuPy array, a torch tensor, or an object supporting __dlpack__ or "
             "__cuda_array_interface__")


def inverse_perm(perm) -> tuple:
    """The permutation undoing ``perm`` (``perm[inv[i]] == i``)."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _zero() -> int:
    return 0


class Adapter:
    """Generic producers (``__cuda_array_interface__``, DLPack, cuweave's DeviceArray).

    Subclasses override what their package does better. Results of generic producers are
    :class:`~cuweave._internal.arrays.DeviceArray` objects (CAI v3 + DLPack).
    """

    name = "generic"
    #: whether the package has a current stream of its own (torch, CuPy)
    owns_stream = False
    #: whether results may be written into the package's arrays (in place); JAX's are not
    writable = True
    #: whether the package's arrays can hold complex32 (half-precision complex) results
    has_complex32 = True
    #: whether the adapter has the block operations of cuweave.distributed's data planes
    #: (``new_array``, ``block_index``, ``take``, ``region``, ``put``: NumPy, CuPy, torch)
    block_ops = False
    #: whether the adapter has the array operations of the NumPy-style FFT layer
    #: (:class:`NamespaceArrayOps`' methods: NumPy, CuPy, torch)
    array_ops = False
    #: ``None``, or ``deliver(obj) -> array``: a result made by :meth:`empty` or
    #: :meth:`result_allocator`, turned into the package's array once the run's work is
    #: queued (packages whose arrays cannot be written after they are made: JAX)
    deliver = None

    # ---- wrapping ------------------------------------------------------------------------
    def wrap(self, x, name: str) -> Operand:
        if isinstance(x, DeviceArray):
            return Operand(x, "cuweave", x.ptr, x.shape, x.strides, x.dtype, "cuda",
                           x.device_id)
        cai = getattr(x, "__cuda_array_interface__", None)
        proto = ("__cuda_array_interface__" if cai is not None else
                 "__dlpack__" if hasattr(x, "__dlpack__") else None)
        if proto is not None:
            try:
                return wrap_cai(x, cai, name) if cai is not None else wrap_dlpack(x, name)
            except CuweaveError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError, IndexError,
                    OverflowError, BufferError) as e:  # a malformed export
                raise InvalidOperandError(
                    f"{name} must export a valid {proto}, got {type(x).__name__!r} whose "
                    f"{proto} is malformed ({type(e).__name__}: {e})") from e
        if isinstance(x, np.generic | int | float | complex | list | tuple):
            raise InvalidOperandError(f"{name} must be {_EXPECTED}, got a "
                                      f"{type(x).__name__} (wrap it with numpy.asarray first)")
        raise InvalidOperandError(f"{name} must be {_EXPECTED}, got {type(x).__name__!r}")

    def host_array(self, op: Operand) -> np.ndarray:
        """Zero-copy NumPy view of the host operand ``op`` (bfloat16/fp8 stored raw)."""
        return op.memory_view()

    def memory_of(self, x) -> str | None:
        """``'cpu'`` or ``'cuda'``: where the array ``x`` lives (``None``: not an array this
        adapter knows)."""
        return "cuda" if hasattr(x, "__cuda_array_interface__") else None

    def to_numpy(self, x) -> np.ndarray:
        """The host array ``x`` as a NumPy array sharing its memory."""
        return np.asarray(x)

    def probe(self, x):
        """``(metadata, pointer)`` of a device array read without wrapping it (a cache key
        part holding package, dtype, shape, strides and device), or ``None`` where only
        :meth:`wrap` describes it (host arrays, lazily conjugated or negated tensors...)."""
        return None

    # ---- streams -------------------------------------------------------------------------
    def stream_getter(self, device_id: int):
        """A no-argument callable returning the package's current stream handle on
        ``device_id`` (resolved now; the legacy default stream 0 without a package stream)."""
        return _zero

    def current_stream(self, device_id: int) -> Stream:
        return Stream(0, None)

    def stream_of(self, obj) -> Stream | None:
        """``obj`` as a :class:`Stream` if it is one of the package's stream objects."""
        return None

    def stream_context(self, stream: int, device_id: int):
        """A context manager making ``stream`` the package's current one, or ``None`` when it
        already is (or the package has no streams). Allocating inside it orders the pool's
        memory on ``stream``: the pool hands out no block still in use on another stream."""
        return None

    def on_stream(self, stream: int, device_id: int, fn, *args, **kwargs):
        ctx = self.stream_context(stream, device_id)
        if ctx is None:
            return fn(*args, **kwargs)
        with ctx:
            return fn(*args, **kwargs)

    # ---- memory --------------------------------------------------------------------------
    def allocate_bytes(self, nbytes: int, device_id: int, stream: int) -> MemoryPointer:
        """``nbytes`` of device memory from the package's pool, ordered on ``stream``."""
        return _core_alloc(nbytes, device_id, stream)

    def empty(self, shape, dtype: str, perm, *, device_id, stream: int = 0,
              allocator=None) -> Operand:
        """A new dense array of the package (``device_id`` None: host memory) whose axes lie
        in ``perm`` order (outermost first) in memory."""
        if device_id is None:
            return _numpy_empty(shape, dtype, perm)
        strides = _perm_strides(shape, perm)
        arr = DeviceArray(shape, dtype, device_id=device_id, strides=strides, stream=stream,
                          allocator=allocator)
        return Operand(arr, "cuweave", arr.ptr, shape, strides, dtype, "cuda", device_id)

    def result_allocator(self, shape, dtype: str, perm, device_id: int):
        """``alloc(stream, foreign) -> (array, pointer)`` creating new results of one layout,
        resolved now (the per-call cost is the package's allocator). ``foreign``: ``stream``
        is not the package's current stream (the memory is then ordered on it). ``perm`` as
        for :meth:`empty` (``None``: C order)."""
        shape, perm = _shape_perm(shape, perm)

        def alloc(stream, foreign=True):
            op = self.empty(shape, dtype, perm, device_id=device_id, stream=stream)
            return op.obj, op.ptr

        return alloc

    def result_maker(self, shape, dtype: str, perm, device_id: int):
        """``(new, pointer)`` or None: ``new()`` makes a result of :meth:`result_allocator`'s
        layout on the package's current stream and ``pointer(x)`` gives its device pointer,
        both callables the package provides (a run calls them instead of ``alloc``, one
        Python frame less); None where the package has no such pair."""
        return None

    # ---- layout operations ---------------------------------------------------------------
    def permute(self, obj, axes):
        """The view of ``obj`` with its axes in ``axes`` order (NumPy's ``transpose``)."""
        return obj.transpose(axes)

    def new_axis(self, obj, axis: int, name: str = "operand"):
        """The view of the 1-D ``obj`` with a unit axis inserted at ``axis`` (0 or 1)."""
        try:
            return obj[None, :] if axis == 0 else obj[:, None]
        except Exception as e:  # a foreign DLPack/CAI object without NumPy indexing
            raise UnsupportedLayoutError(
                f"{name} must be a matrix or a 1-D array viewable as one (NumPy-style "
                f"indexing), got a 1-D {type(obj).__name__}: pass it with shape "
                f"{'(1, N)' if axis == 0 else '(M, 1)'}") from e

    def from_numpy(self, arr: np.ndarray):
        """A host result computed in NumPy, as the package's host array."""
        return arr

    def broadcast_into(self, dst, src, shape, stream: int, device_id: int) -> None:
        """``dst[...] = broadcast(src, shape)`` queued on ``stream`` (device arrays)."""
        raise UnsupportedLayoutError(
            f"c must be a full (M, N) matrix in a cuBLASLt layout for {self.name} operands "
            "(broadcasting c needs torch or CuPy), got a broadcast/strided c")

    @property
    def can_broadcast(self) -> bool:
        return type(self).broadcast_into is not Adapter.broadcast_into

    def dense_copy(self, obj, shape, order: str, stream: int, device_id: int):
        """A new dense device array of ``obj`` broadcast to ``shape``, its last two axes in
        ``order`` ("C": row-major, "F": column-major; batch axes outermost, C order), queued on
        ``stream`` (a layout a library cannot address, copied into one it can)."""
        raise UnsupportedLayoutError(
            f"{self.name} operands in this layout need a copy, which needs torch or CuPy")

    @property
    def can_copy(self) -> bool:
        return type(self).dense_copy is not Adapter.dense_copy

    def scale_(self, obj, scale, stream: int, device_id: int) -> None:
        """``obj *= scale`` on the device, queued on ``stream``."""
        raise InvalidOptionError(
            f"norm must be None for {self.name} operands when it cannot be fused, got a scale")

    # ---- blocks (cuweave.distributed's GPU plane: packing, unpacking, new arrays) ---------
    # torch and CuPy provide ``device_of(x)``, ``device_count()``, ``device_scope(device_id)``,
    # ``new_array(shape, dtype, device_id, *, order, zeros)``, ``block_index(idx, like)`` (per
    # axis a slice or an int64 NumPy array -> the package's index on ``like``'s device),
    # ``take(x, idx)`` (a C-contiguous copy), ``region(out, idx)`` (a C-contiguous writable
    # view, or None), ``put(out, idx, block)``, ``pointer(x)``, ``matrix_op(x, t, conj)``.
    def new_block(self, like, shape, dtype=None, *, order: str = "C", zeros: bool = False):
        """A new array of ``shape`` on ``like``'s device, of ``like``'s dtype unless ``dtype``
        (the package's or NumPy's) is given, in ``order`` "C" or "F"."""
        return self.new_array(shape, like.dtype if dtype is None else dtype,
                              self.device_of(like), order=order, zeros=zeros)

    def nbytes(self, x) -> int:
        return x.nbytes


class NamespaceArrayOps:
    """The array operations of NumPy's namespace (NumPy and CuPy arrays; ``xp`` is the
    package's module): the operations the NumPy-style FFT layer (``cuweave.fft.numpy``) applies
    to the arrays it is given, in their own package. torch's adapter has the same methods."""

    array_ops = True
    #: whether the package's arrays live in device memory (CuPy) or host memory (NumPy)
    device_memory = False
    #: NumPy's namespace has no complex32 (half-precision complex) dtype
    has_complex32 = False
    _labels: dict = {}  # dtype -> its label (dtype.name takes microseconds)

    def kind_size(self, x):
        """``(kind, itemsize)`` of ``x``'s dtype, kind one of NumPy's ``"biufc"``."""
        dt = x.dtype
        return dt.kind, dt.itemsize

    def dtype_label(self, x) -> str:
        """``x``'s dtype as a name the package's ``astype`` takes (byte-swapped data named so
        as to be converted)."""
        dt = x.dtype
        name = self._labels.get(dt)
        if name is None:
            name = self._labels[dt] = dt.name if dt.isnative else dt.str
        return name

    def astype(self, x, name):
        return x.astype(name)

    def new_like(self, shape, name, like, zeros: bool = False):
        """A new array of ``shape`` and dtype ``name`` where ``like`` lives."""
        return (self.xp.zeros if zeros else self.xp.empty)(shape, dtype=name)

    def conj(self, x):
        return self.xp.conj(x)

    def conj_(self, x):
        return self.xp.conj(x, out=x)

    def to_back(self, x, axes):
        """A dense copy of ``x`` with ``axes`` moved last, in order."""
        last = list(range(x.ndim - len(axes), x.ndim))
        return self.xp.ascontiguousarray(self.xp.moveaxis(x, axes, last))

    def from_back(self, y, axes):
        last = list(range(y.ndim - len(axes), y.ndim))
        return self.xp.moveaxis(y, last, axes)

    def copy_into(self, out, y):
        out[...] = y
        return out

    def fft_shift(self, x, axes, name: str):
        """The package's ``fft.fftshift``/``fft.ifftshift`` (``name``) of ``x``."""
        return getattr(self.xp.fft, name)(x, axes=axes)


class NumpyAdapter(NamespaceArrayOps, Adapter):
    name = "numpy"
    xp = np
    block_ops = True

    def memory_of(self, x) -> str:
        return "cpu"

    def to_numpy(self, x) -> np.ndarray:
        return x

    # ---- blocks (cuweave.distributed's host plane; the GPU adapters have the same) ---------
    @staticmethod
    def device_of(like):
        return None

    @staticmethod
    def block_index(idx, like):
        if _all_slices(idx):
            return tuple(idx)
        return np.ix_(*[np.arange(i.start, i.stop) if isinstance(i, slice) else i for i in idx])

    @staticmethod
    def new_array(shape, dtype, device_id, *, order="C", zeros=False):
        return (np.zeros if zeros else np.empty)(shape, dtype, order=order)

    @staticmethod
    def take(x, idx):
        return np.ascontiguousarray(x[idx])

    @staticmethod
    def region(out, idx):
        return out[idx] if _all_slices(idx) else None

    @staticmethod
    def put(out, idx, block) -> None:
        out[idx] = block

    def wrap(self, x, name: str) -> Operand:
        # a masked array's mask would be silently ignored
        if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise InvalidOperandError(f"{name} must not be a masked array (its mask cannot be "
                                      "honoured), got a numpy.ma.MaskedArray; pass x.filled()")
        return wrap_numpy(x, name)

    def scale_(self, obj, scale, stream, device_id) -> None:
        obj *= scale


NUMPY, GENERIC = NumpyAdapter(), Adapter()
ADAPTERS.update({"numpy": NUMPY, "cai": GENERIC, "dlpack": GENERIC, "cuweave": GENERIC,
                 None: GENERIC})


# ---- block helpers ---------------------------------------------------------------------------
def _all_slices(idx) -> bool:
    return all(isinstance(i, slice) for i in idx)


def _slices_then_full(idx) -> tuple:
    """The basic-slicing part of ``idx``: its slices, ``slice(None)`` for index arrays."""
    return tuple(i if isinstance(i, slice) else slice(None) for i in idx)


# ---- allocation helpers ----------------------------------------------------------------------
def _shape_perm(shape, perm) -> tuple:
    shape = tuple(shape)
    return shape, (tuple(range(len(shape))) if perm is None else tuple(perm))


def _perm_strides(shape, perm) -> tuple:
    """Element strides of a dense array of ``shape`` whose axes lie in ``perm`` order."""
    strides = [0] * len(shape)
    for axis, stride in zip(perm, c_strides(tuple(shape[p] for p in perm))):
        strides[axis] = stride
    return tuple(strides)


def _pinned_empty(shape, dtype, perm) -> Operand | None:
    np_dtype = numpy_dtype(dtype)
    flat = _pinned.take(math.prod(shape) * np_dtype.itemsize)
    if flat is None:
        return None
    x = flat.view(np_dtype).reshape(tuple(shape[p] for p in perm))
    return wrap_numpy(x.transpose(inverse_perm(perm)), "result")


def _numpy_empty(shape, dtype, perm) -> Operand:
    try:
        x = np.empty(tuple(shape[p] for p in perm), dtype=numpy_dtype(dtype))
    except (MemoryError, ValueError) as e:  # ValueError: "array is too big" (size overflow)
        raise too_large("the result", shape, dtype, e) from e
    return wrap_numpy(x.transpose(inverse_perm(perm)), "result")


def _core_alloc(nbytes: int, device_id: int, stream: int) -> MemoryPointer:
    from cuda.core import Stream as CoreStream

    from . import cuda

    dev = cuda.core_device(device_id)
    s = CoreStream.from_handle(stream) if stream else dev.default_stream
    buf = dev.allocate(nbytes, stream=s)

    def fin(buf=buf, s=s):
        buf.close(s)

    return MemoryPointer(int(buf.handle), nbytes, fin)
