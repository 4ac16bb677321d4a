"""The package adapters (``_internal/packages.py``) with a recording stand-in for CuPy: per-device
current streams and results, made current only when another device is."""

from __future__ import annotations

import sys
import types

import pytest

from cuweave._internal import packages
from cuweave._internal.errors import InvalidOperandError


class _FakeCupy:
    """What the CuPy adapter touches: devices, per-device current streams, ``empty``."""

    def __init__(self):
        self.current = 0
        self.entered = []
        fake = self

        class Device:
            def __init__(self, i):
                self.id = i

            def __enter__(self):
                fake.entered.append(self.id)
                self.prev, fake.current = fake.current, self.id
                return self

            def __exit__(self, *exc):
                fake.current = self.prev

        class Array:
            def __init__(self, shape, dtype, device):
                self.shape, self.dtype, self.device_id = tuple(shape), dtype, device
                self.data = types.SimpleNamespace(ptr=0x1000 * (device + 1))

            def transpose(self, axes):
                return ("transposed", self, tuple(axes))

        self.cuda = types.SimpleNamespace(
            Device=Device,
            get_current_stream=lambda: types.SimpleNamespace(ptr=0x500 + fake.current),
            runtime=types.SimpleNamespace(getDevice=lambda: fake.current))
        self.empty = lambda shape, dtype: Array(shape, dtype, fake.current)


@pytest.fixture
def cupy(monkeypatch):
    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_cupy_current_stream_is_the_operands_devices(cupy):
    get = packages.CUPY.stream_getter(1)
    assert get() == 0x501 and cupy.entered == [1]  # device 0 current: 1 made current
    cupy.current = 1
    assert get() == 0x501 and cupy.entered == [1]  # already current: no switch
    assert packages.CUPY.stream_getter(0)() == 0x500


def test_cupy_results_are_made_on_the_operands_device(cupy):
    alloc = packages.CUPY.result_allocator((4, 6), "float32", None, 1)
    x, ptr = alloc(0)
    assert x.device_id == 1 and ptr == 0x2000 and x.shape == (4, 6) and cupy.entered == [1]
    cupy.current = 1
    x, _ = alloc(0)
    assert x.device_id == 1 and cupy.entered == [1]
    kind, base, axes = packages.CUPY.result_allocator((4, 6), "float32", (1, 0), 1)(0)[0]
    assert kind == "transposed" and base.shape == (6, 4) and axes == (1, 0)


def test_dtypes_cupy_lacks_come_back_as_device_arrays(cupy, monkeypatch):
    made = []

    class Made:
        def __init__(self, shape, dtype, **kw):
            made.append((shape, dtype, kw["device_id"]))
            self.ptr = 0x9000

    monkeypatch.setattr(packages, "DeviceArray", Made)
    obj, ptr = packages.CUPY.result_allocator((2, 3), "bfloat16", None, 0)(0)
    assert isinstance(obj, Made) and ptr == 0x9000 and made == [((2, 3), "bfloat16", 0)]


def test_generic_producers_cannot_broadcast_or_scale():
    assert packages.TORCH.can_broadcast and packages.CUPY.can_broadcast
    assert not packages.GENERIC.can_broadcast and not packages.NUMPY.can_broadcast
    with pytest.raises(ValueError, match="norm must be None for generic operands"):
        packages.GENERIC.scale_(object(), 2.0, 0, 0)


def test_probe_reads_only_device_arrays_of_torch_and_cupy(cupy):
    assert packages.probe(3.0) is None
    fake_torch_object = type("Size", (), {"__module__": "torch"})()
    assert packages.probe(fake_torch_object) is None  # not a tensor: wrapping reports it
    with pytest.raises(InvalidOperandError, match="a must be"):
        packages.wrap_operand(fake_torch_object, "a")
