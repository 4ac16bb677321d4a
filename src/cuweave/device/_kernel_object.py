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

and calling :func:`register_kernel_type` once for the class from its constructor. That imports
:mod:`cuweave.device._numba_objects` (and numba) only then, so ``import cuweave`` stays free of
numba. Nothing else is asked of the user: building the object is enough.
"""

from __future__ import annotations

import threading

__all__ = ["KernelObject", "register_kernel_type"]

_registered: set[type] = set()
_lock = threading.Lock()


class KernelObject:
    """Mixin for host objects that numba kernels may reference (see the module docstring)."""

    __slots__ = ()

    def _kernel_key(self) -> tuple:  # pragma: no cover - interface
        raise NotImplementedError

    def _kernel_attribute(self, name: str):  # pragma: no cover - interface
        raise AttributeError(name)


def register_kernel_type(cls: type) -> None:
    """Make instances of ``cls`` (a :class:`KernelObject`) typable by numba-cuda; idempotent.

    Imports numba; call it from the constructor of ``cls`` (after checking numba is present).
    """
    if cls in _registered:
        return
    with _lock:
        if cls in _registered:
            return
        from . import _numba_objects

        _numba_objects.register(cls)
        _registered.add(cls)
