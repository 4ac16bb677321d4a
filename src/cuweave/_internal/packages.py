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
registered in :data:`~.registry.ADAPTERS`. The package's module is taken from ``sys.modules``:
nothing here imports torch or CuPy.

This module is the front the engines use: finding an array's adapter (:func:`adapter_of`),
wrapping (:func:`wrap_operand`), the function forms' probes, new results (:func:`empty`) and
streams (:func:`resolve_stream`). The adapters themselves live below it: the base, NumPy and
generic ones in :mod:`.adapters`, torch's, CuPy's and JAX's in ``_torch.py``, ``_cupy.py`` and
``_jax.py`` (their names are served here too: :data:`TORCH`, :data:`CUPY`, ...), and the
package -> adapter table in :mod:`.registry`.

Examples
--------
>>> import numpy as np
>>> op = wrap_operand(np.zeros((2, 3), np.float32), "a")
>>> adapter(op.package).name, op.shape
('numpy', (2, 3))
"""

from __future__ import annotations

import numpy as np

from . import _cupy, _jax, _torch  # noqa: F401 - imported to register their adapters
from .adapters import (  # noqa: F401 - the adapters' names, served here too
    GENERIC,
    NUMPY,
    Adapter,
    NamespaceArrayOps,
    NumpyAdapter,
    _all_slices,
    _perm_strides,
    _pinned_empty,
    _shape_perm,
    _slices_then_full,
    inverse_perm,
)
from .arrays import ALIGNMENT, Operand
from .errors import InvalidOperandError, InvalidOptionError
from .memory import allocate  # noqa: F401 - served here too
from .registry import ADAPTERS, BY_MODULE, adapter  # noqa: F401 - served here too
from .streams import Stream
from .wrapping import probe_torch, probe_torch_pair

__all__ = ["Adapter", "ADAPTERS", "adapter", "adapter_of", "wrap_operand", "probe", "prober",
           "PROBERS", "pair_prober", "PAIR_PROBERS", "empty", "allocate", "resolve_stream",
           "inverse_perm"]

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

    The array's adapter (:func:`adapter_of`) wraps it: one route for every package (the
    adapter is remembered per array type, so the lookup is made once per type).

    Examples
    --------
    >>> import numpy as np
    >>> wrap_operand(np.zeros((2, 3), dtype=np.float32).T, "a")
    Operand(numpy, float32, shape=(3, 2), strides=(1, 3), cpu)
    """
    cls = type(x)
    try:
        ad = _WRAP.get(cls)
        if ad is None:
            ad = adapter_of(x)
            if len(_WRAP) < 256:  # bounded: classes made on the fly are looked up each time
                _WRAP[cls] = ad
        return ad.wrap(x, name)
    except InvalidOperandError as e:  # dtypes.canonical_name does not know the parameter
        if str(e).startswith("dtype must"):
            raise InvalidOperandError(f"{name} {e}") from None
        raise


#: array type -> its adapter (filled by :func:`wrap_operand`)
_WRAP: dict = {}


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


TORCH, TorchAdapter = _torch.TORCH, _torch.TorchAdapter
CUPY, CupyAdapter = _cupy.CUPY, _cupy.CupyAdapter
