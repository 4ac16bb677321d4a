"""One adapter per array package: the only place that knows NumPy, CuPy, torch or DLPack/CAI.

An adapter owns, for its package: wrapping an array into an
:class:`~cuweave._internal.arrays.Operand` (:meth:`Adapter.wrap`), reading a device array's
metadata without wrapping it (:meth:`Adapter.probe`, the function forms' cache keys), the
current stream (:meth:`Adapter.stream_getter`, resolved at plan time), memory from the
package's own pool (:meth:`Adapter.allocate_bytes`) and new results in the package
(:meth:`Adapter.result_allocator`, built at plan time; :meth:`Adapter.empty`), and the few
layout operations an engine needs on the user's arrays (permute, broadcast copy, scaling);
torch's and CuPy's also pack and unpack blocks for cuweave.distributed's GPU plane
(:meth:`Adapter.new_block` and the primitives listed beside it).

Engines never name a package: they hold the adapter of their operands
(``adapter(op.package)``) and call it. Adding a package (JAX, say) is one new subclass
registered in :data:`ADAPTERS`. The package's module is taken from ``sys.modules``: nothing
here imports torch or CuPy. The base, NumPy and generic adapters and the lookups live here;
torch's, CuPy's and JAX's adapters in ``_torch.py``, ``_cupy.py`` and ``_jax.py``, imported at
the end of this module (names re-exported here: :data:`TORCH`, :data:`CUPY`).

Examples
--------
>>> import numpy as np
>>> op = wrap_operand(np.zeros((2, 3), np.float32), "a")
>>> adapter(op.package).name, op.shape
('numpy', (2, 3))
"""

from __future__ import annotations

import math

import numpy as np

from . import pinned as _pinned
from .arrays import ALIGNMENT, DeviceArray, Operand, c_strides
from .dtypes import numpy_dtype
from .errors import (
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    UnsupportedLayoutError,
)
from .memory import MemoryPointer, allocate  # noqa: F401 - allocate: re-exported
from .streams import Stream
from .wrapping import (
    probe_torch,
    probe_torch_pair,
    wrap_cai,
    wrap_dlpack,
    wrap_numpy,
    wrap_torch,
)

__all__ = ["Adapter", "ADAPTERS", "adapter", "adapter_of", "wrap_operand", "probe", "prober",
           "PROBERS", "pair_prober", "PAIR_PROBERS", "empty", "allocate", "resolve_stream",
           "inverse_perm"]

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
        if isinstance(x, np.ma.MaskedArray):  # its mask would be silently ignored
            raise InvalidOperandError(f"{name} must not be a masked array (its mask cannot be "
                                      "honoured), got a numpy.ma.MaskedArray; pass x.filled()")
        return wrap_numpy(x, name)

    def scale_(self, obj, scale, stream, device_id) -> None:
        obj *= scale


NUMPY, GENERIC = NumpyAdapter(), Adapter()
#: package name (``Operand.package``) -> adapter; ``None`` (no package) is the generic one;
#: torch's, CuPy's and JAX's adapters register here from their modules (imported at the end)
ADAPTERS = {"numpy": NUMPY, "cai": GENERIC, "dlpack": GENERIC, "cuweave": GENERIC,
            None: GENERIC}
#: top-level module of an array's type -> adapter, for packages whose adapters live in
#: modules of their own and register here (JAX: ``_jax.py``, imported at the end of this one)
BY_MODULE: dict = {}


def adapter(package: str | None) -> Adapter:
    """The adapter of ``Operand.package`` ``package``."""
    return ADAPTERS.get(package, GENERIC)


def package_adapter(package) -> Adapter | None:
    """The adapter of the array package ``package`` (its module, or its name) when it has the
    block operations (NumPy, CuPy, torch), else ``None``. Imports nothing."""
    name = getattr(package, "__name__", package)
    ad = ADAPTERS.get(name) if isinstance(name, str) else None
    return ad if ad is not None and ad.block_ops else None


def adapter_of(x) -> Adapter:
    """The adapter that wraps ``x`` (by ``type(x).__module__``; never imports a package)."""
    cls = type(x)
    if cls is np.ndarray:
        return NUMPY
    mod = cls.__module__
    if (mod == "torch" or mod.startswith("torch.")) and hasattr(x, "data_ptr"):
        return _torch.TORCH
    if mod.split(".", 1)[0] == "cupy" and hasattr(x, "data") and hasattr(x, "device"):
        return _cupy.CUPY
    if isinstance(x, np.ndarray):
        return NUMPY
    return BY_MODULE.get(mod.split(".", 1)[0], GENERIC)


def array_adapter(x):
    """The adapter of ``x`` when it has the array operations (:class:`NamespaceArrayOps`),
    else ``None``. NumPy scalars count as NumPy's (0-d arrays)."""
    ad = NUMPY if isinstance(x, np.generic) else adapter_of(x)
    return ad if ad.array_ops else None


def wrap_operand(x, name: str = "operand") -> Operand:
    """Describe ``x`` as an :class:`Operand`; ``name`` is used in error messages.

    NumPy arrays and torch tensors, the most frequent, go to their adapters' wrapping without
    the lookup (this is on every call's path).

    Examples
    --------
    >>> import numpy as np
    >>> wrap_operand(np.zeros((2, 3), dtype=np.float32).T, "a")
    Operand(numpy, float32, shape=(3, 2), strides=(1, 3), cpu)
    """
    cls = type(x)
    try:
        if cls is np.ndarray:
            return wrap_numpy(x, name)
        if cls.__module__ == "torch" and hasattr(x, "data_ptr"):
            return wrap_torch(x, name)
        return adapter_of(x).wrap(x, name)
    except InvalidOperandError as e:  # dtypes.canonical_name does not know the parameter
        if str(e).startswith("dtype must"):
            raise InvalidOperandError(f"{name} {e}") from None
        raise


def probe(x):
    """``(metadata, pointer)`` of a torch/CuPy device array (see :meth:`Adapter.probe`)."""
    fn = PROBERS.get(type(x))
    if fn is None:
        fn = prober(type(x))
    return fn(x)


def prober(cls):
    """The probe of arrays of type ``cls``: a function ``x -> (metadata, pointer) or None``
    (:func:`probe` without the dispatch; one dictionary lookup per type once known)."""
    fn = PROBERS.get(cls)
    if fn is None:
        mod = cls.__module__
        if mod == "torch" or mod.startswith("torch."):
            fn = probe_torch
        elif mod.startswith("cupy"):
            fn = _probe_cupy
        else:
            fn = _no_probe
        if len(PROBERS) < 256:  # bounded: classes made on the fly are probed uncached
            PROBERS[cls] = fn
    return fn


def pair_prober(cls_a, cls_b):
    """The probe of two arrays of types ``cls_a`` and ``cls_b`` read together (the function
    forms' keys): ``(a, b, extra) -> (key, pointer of a, pointer of b)`` or None, the key
    holding both arrays' metadata, the alignment of each pointer in bytes (its lowest set bit,
    at most 256; 0 counts as 256) and ``extra``. Known in :data:`PAIR_PROBERS` by the type
    (arrays of one type) or the pair of types; torch's reads both tensors in one frame."""
    kind = cls_a if cls_a is cls_b else (cls_a, cls_b)
    fn = PAIR_PROBERS.get(kind)
    if fn is not None:
        return fn
    first, second = prober(cls_a), prober(cls_b)
    if first is probe_torch and second is probe_torch:
        fn = probe_torch_pair
    else:
        def fn(a, b, extra):
            fa = first(a)
            if fa is None:
                return None
            fb = second(b)
            if fb is None:
                return None
            pa, pb = fa[1], fb[1]
            return (fa[0], ALIGNMENT[pa & 255], fb[0], ALIGNMENT[pb & 255], extra), pa, pb
    if len(PAIR_PROBERS) < 256:  # bounded as PROBERS
        PAIR_PROBERS[kind] = fn
    return fn


def _probe_cupy(x):
    if hasattr(x, "data") and getattr(x, "device", None) is not None:
        return _cupy.CUPY.probe(x)
    return None


def _no_probe(x):
    return None


#: array type -> its probe (filled by :func:`prober`; ``PROBERS.get(type(x))`` is the
#: function forms' dispatch)
PROBERS: dict = {}
#: array type, or (type of a, type of b) -> :func:`pair_prober`'s probe
PAIR_PROBERS: dict = {}


def empty(ref: Operand, shape, dtype: str, *, perm=None, device_id=None, stream: int = 0,
          allocator=None, pinned: bool = False) -> Operand:
    """A new uninitialized array in ``ref``'s package and memory space.

    ``perm`` orders the axes from outermost to innermost in memory (default C order): the array
    is dense and element ``idx`` lives at ``sum(idx[p] * stride[p])`` with strides growing from
    ``perm[-1]`` to ``perm[0]``. E.g. ``perm=(0, 2, 1)`` makes a batch of column-major matrices.
    ``pinned``: a NumPy result that a GPU run downloads into, in page-locked memory from
    :mod:`.pinned` where its rules allow.
    """
    shape = tuple(int(s) for s in shape)
    perm = tuple(range(len(shape))) if perm is None else tuple(perm)
    if ref.device == "cpu":
        if pinned and ref.package == "numpy":
            op = _pinned_empty(shape, dtype, perm)
            if op is not None:
                return op
        return adapter(ref.package).empty(shape, dtype, perm, device_id=None)
    dev = ref.device_id if device_id is None else device_id
    return adapter(ref.package).empty(shape, dtype, perm, device_id=dev, stream=stream,
                                      allocator=allocator)


def resolve_stream(stream, *, package: str | None = None, device_id: int = 0) -> Stream:
    """Turn ``stream`` into a :class:`Stream`.

    Accepted: ``None`` (the current stream of ``package``: torch/CuPy; else the legacy default
    stream), an ``int`` handle, any object with ``__cuda_stream__`` (cuda.core streams and
    others), ``torch.cuda.Stream`` and ``cupy.cuda.Stream``. The user's object is kept alive
    in ``.obj``.
    """
    if stream is None:
        return adapter(package).current_stream(device_id)
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise InvalidOptionError(f"stream must be a non-negative handle, got {stream!r}")
        return Stream(stream, None)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        handle = value[1] if isinstance(value, tuple) and len(value) == 2 else value
        if not isinstance(handle, int) or isinstance(handle, bool) or handle < 0:
            raise InvalidOptionError(
                "stream's __cuda_stream__ must return (version, handle) with a non-negative "
                f"int handle, got {value!r}")
        return Stream(int(handle), stream)
    mod = type(stream).__module__.split(".", 1)[0]
    found = ADAPTERS[mod].stream_of(stream) if mod in ("torch", "cupy") else None
    if found is not None:
        return found
    raise InvalidOptionError(
        "stream must be None, an int handle, an object with __cuda_stream__, a torch.cuda.Stream"
        f" or a cupy.cuda.Stream, got {stream!r}"
    )


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
    x = np.empty(tuple(shape[p] for p in perm), dtype=numpy_dtype(dtype))
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


# adapters kept in modules of their own register into ADAPTERS and BY_MODULE when imported
# (here, so that every lookup above finds them, whichever module a process imports first);
# their names are served from those modules
from . import _cupy, _jax, _torch  # noqa: E402,F401

_ELSEWHERE = {"TORCH": "_torch", "TorchAdapter": "_torch", "CUPY": "_cupy", "CupyAdapter": "_cupy"}


def __getattr__(name):
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(globals()[module], name)
