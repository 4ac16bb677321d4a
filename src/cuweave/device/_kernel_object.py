"""Device objects usable inside numba kernels: the numba-free half of the mechanism.

A *device object* is a host Python object (a cuFFTDx ``FFT`` now, a cuBLASDx ``Matmul`` later)
that a ``@cuda.jit`` kernel may refer to as a global or closure variable::

    fft = FFT(...)

    @cuda.jit
    def kernel(x):
        td = cuda.local.array(fft.storage_size, dtype=fft.value_type)   # compile-time constants
        fft.execute(td, cuda.shared.array(0, dtype=fft.value_type))     # a linked device call

A class opts in by subclassing :class:`KernelObject` and implementing

* ``_kernel_key()`` -- a hashable, printable tuple that fully determines the object's traits
  (two objects with equal keys share one numba type), and
* ``_kernel_attribute(name)`` -- the value of attribute ``name`` inside a kernel, or raise
  ``AttributeError``. Values may be ints/bools (typed as literals, so they can size
  ``cuda.local.array``), floats, tuples of those, numba types or NumPy scalar types (usable as
  ``dtype=``), or numba device functions (``cuda.jit(device=True)`` dispatchers: attribute
  *calls* such as ``fft.execute(a, b)`` compile to a direct, inlinable call).

and calling :func:`register_kernel_type` once for the class from its constructor. When numba is
already imported that registers the class at once; otherwise it is registered the moment
``numba.cuda`` is imported (a one-shot import hook), so building an object never imports numba
itself and ``import cuweave`` stays free of it. Nothing else is asked of the user: building the
object is enough.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["KernelObject", "register_kernel_type", "ensure_registered"]

_registered: set[type] = set()
_pending: set[type] = set()
_lock = threading.RLock()
_importing = threading.local()  # this thread is importing _numba_objects


class KernelObject:
    """Mixin for host objects that numba kernels may reference (see the module docstring)."""

    __slots__ = ()

    def _kernel_key(self) -> tuple:  # pragma: no cover - interface
        raise NotImplementedError

    def _kernel_attribute(self, name: str):  # pragma: no cover - interface
        raise AttributeError(name)


def ensure_registered(cls: type) -> None:
    """Register ``cls`` with numba-cuda now (imports numba); idempotent.

    Importing ``_numba_objects`` may be what imports numba-cuda, whose import hook then asks
    for the pending classes again: that re-entrant call only leaves them pending, and the outer
    call registers them once the module is complete."""
    if cls in _registered:
        return
    if getattr(_importing, "active", False):  # re-entered from numba-cuda's import
        _pending.add(cls)
        return
    with _lock:
        if cls in _registered:
            return
        _importing.active = True
        try:
            from . import _numba_objects
        finally:
            _importing.active = False
        for c in [cls, *sorted(_pending - {cls}, key=lambda c: c.__name__)]:
            if c not in _registered:
                _numba_objects.register(c)
                _registered.add(c)
            _pending.discard(c)


def register_kernel_type(cls: type) -> None:
    """Make instances of ``cls`` (a :class:`KernelObject`) typable by numba-cuda; idempotent.

    Registers now if ``numba.cuda`` is imported, else as soon as it is.
    """
    if cls in _registered:
        return
    if "numba.cuda" in sys.modules:
        ensure_registered(cls)
        return
    with _lock:
        _pending.add(cls)
        if not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _RegisterOnImport())
    if "numba.cuda" in sys.modules:  # imported meanwhile by another thread
        ensure_registered(cls)


class _RegisterOnImport:
    """Meta-path finder: once ``numba.cuda`` has executed, register the pending classes."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "numba.cuda":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, hook = spec.loader, self

        class _Loader:
            def __getattr__(self, name):  # everything else is the real loader's
                return getattr(loader, name)

            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                if hook in sys.meta_path:
                    sys.meta_path.remove(hook)
                for cls in list(_pending):
                    ensure_registered(cls)

        spec.loader = _Loader()
        return spec
