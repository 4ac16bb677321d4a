"""A stand-in for CuPy on the host: NumPy arrays posing as CuPy arrays of device 0.

CuPy's array API follows NumPy's, so the CuPy adapter's block operations (packing, unpacking,
new arrays: ``cuweave._internal.packages.CupyAdapter``) run unchanged on these arrays, and
the GPU plane's CuPy path can be checked without a GPU. Only what those operations touch is
provided. Use :func:`installed` to put it in ``sys.modules`` for a while.
"""

from __future__ import annotations

import contextlib
import sys
import types

import numpy as np


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    """A NumPy array with CuPy's ``device`` and ``data.ptr``."""

    __module__ = "cupy"

    @property
    def device(self):
        return types.SimpleNamespace(id=0)

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def _as(a):
    return np.asarray(a).view(ndarray)


class FakeCupy(types.ModuleType):
    """The ``cupy`` module as the adapter sees it; ``entered`` records the devices made
    current."""

    def __init__(self):
        super().__init__("cupy")
        self.entered = []
        fake = self

        class Device:
            def __init__(self, i):
                self.id = i

            def __enter__(self):
                fake.entered.append(self.id)
                return self

            def __exit__(self, *exc):
                return False

        self.ndarray = ndarray
        self.cuda = types.SimpleNamespace(
            Device=Device, runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))

    @staticmethod
    def asarray(a):
        return _as(a)

    @staticmethod
    def empty(shape, dtype=np.float64, order="C"):
        return _as(np.empty(shape, dtype, order=order))

    @staticmethod
    def zeros(shape, dtype=np.float64, order="C"):
        return _as(np.zeros(shape, dtype, order=order))

    @staticmethod
    def arange(start, stop):
        return _as(np.arange(start, stop))

    @staticmethod
    def take(a, indices, axis=None):
        return _as(np.take(a, np.asarray(indices), axis=axis))

    @staticmethod
    def ascontiguousarray(a):
        return _as(np.ascontiguousarray(a))

    @staticmethod
    def ix_(*args):
        return tuple(_as(i) for i in np.ix_(*[np.asarray(a) for a in args]))


@contextlib.contextmanager
def installed():
    """``sys.modules['cupy']`` is a :class:`FakeCupy` inside the block."""
    before = sys.modules.get("cupy")
    fake = sys.modules["cupy"] = FakeCupy()
    try:
        yield fake
    finally:
        if before is None:
            del sys.modules["cupy"]
        else:
            sys.modules["cupy"] = before


def to_cupy(x) -> ndarray:
    """A fake CuPy array holding a copy of ``x`` in ``x``'s memory order."""
    return _as(np.array(x, order="K"))
