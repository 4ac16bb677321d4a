"""The public allocator protocol (:mod:`cuweave.memory`, nvmath-python's ``nvmath.memory``) and
the one allocation order (``options.allocator`` → the package pool → cuda.core)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import cuweave
from cuweave import memory as public
from cuweave._internal import memory
from cuweave._internal.errors import InvalidOptionError
from cuweave.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer


def test_public_names():
    assert public.__all__ == ["BaseCUDAMemoryManager", "BaseCUDAMemoryManagerAsync",
                              "MemoryPointer"]
    assert cuweave.MemoryPointer is MemoryPointer
    assert cuweave.BaseCUDAMemoryManager is BaseCUDAMemoryManager
    assert cuweave.BaseCUDAMemoryManagerAsync is BaseCUDAMemoryManagerAsync


def test_memory_pointer_frees_once_and_a_second_free_raises():
    freed = []
    p = MemoryPointer(0x1000, 64, lambda: freed.append(1))
    p.free()
    assert freed == [1]
    with pytest.raises(RuntimeError, match="already been freed"):
        p.free()
    del p  # garbage collection after free(): no second finalizer call
    assert freed == [1]
    q = MemoryPointer(0x2000, 8, lambda: freed.append(2))
    del q  # never freed: garbage collection frees it
    assert freed == [1, 2]


def test_managers_are_constructed_as_nvmaths():
    log = logging.getLogger("test.memory")

    class Sync(BaseCUDAMemoryManager):
        def memalloc(self, size):
            return MemoryPointer(0x1000, size)

    class Async(BaseCUDAMemoryManagerAsync):
        def memalloc_async(self, size, stream):
            return MemoryPointer(0x1000, size)

    for cls in (Sync, Async):
        m = cls(3, log)
        assert (m.device_id, m.logger) == (3, log)
        assert cls(0, None).logger.name == "cuweave.memory"
    with pytest.raises(TypeError):
        BaseCUDAMemoryManager(0, log)  # abstract
    with pytest.raises(TypeError):
        BaseCUDAMemoryManagerAsync(0, log)


class _CupyLike:  # cupy.cuda.MemoryPointer: .ptr, no free()
    def __init__(self, ptr, size, log):
        self.ptr, self.size, self._log = ptr, size, log

    def __del__(self):
        self._log.append(("released", self.ptr))


class _NumbaLike:  # numba's MemoryPointer: .device_pointer and free()
    def __init__(self, ptr, size, log):
        self.device_pointer, self.size, self._log = ptr, size, log

    def free(self):
        self._log.append(("free", self.device_pointer))


class _Sync(BaseCUDAMemoryManager):
    def __init__(self, device_id, logger, kind):
        super().__init__(device_id, logger)
        self.kind, self.log, self.sizes = kind, [], []

    def memalloc(self, size):
        self.sizes.append(size)
        return self.kind(0x4000 + len(self.sizes) * 0x100, size, self.log)


@pytest.mark.parametrize("kind, event", [(_CupyLike, "released"), (_NumbaLike, "free")])
def test_user_allocations_of_any_pointer_attribute(kind, event):
    alloc = _Sync(0, None, kind)
    p = memory.allocate(100, package="numpy", device_id=0, stream=7, allocator=alloc)
    assert isinstance(p, MemoryPointer)
    assert (p.device_ptr, p.size, alloc.sizes) == (0x4100, 100, [100])
    assert alloc.log == []  # alive while cuweave uses it
    p.free()
    assert alloc.log == [(event, 0x4100)]
    with pytest.raises(RuntimeError):
        p.free()


def test_user_memory_pointer_is_used_as_is():
    freed = []

    class Alloc(BaseCUDAMemoryManager):
        def memalloc(self, size):
            return MemoryPointer(0x1000 + size, size, lambda: freed.append(size))

    p = memory.allocate(100, package=None, device_id=0, stream=0, allocator=Alloc(0, None))
    assert (p.device_ptr, p.size) == (0x1000 + 100, 100)
    p.free()
    assert freed == [100]


def test_async_allocator_gets_a_cuda_core_stream(monkeypatch):
    made = []

    class FakeCoreStream:
        def __init__(self, handle, device_id):
            self.handle, self.device_id = handle, device_id
            made.append(self)

    monkeypatch.setattr(memory, "_core_stream", FakeCoreStream)

    class Alloc(BaseCUDAMemoryManagerAsync):
        calls = []

        def memalloc_async(self, size, stream):
            self.calls.append((size, stream))
            return MemoryPointer(0x2000, size)

    a = Alloc(1, None)
    p = memory.allocate(64, package=None, device_id=1, stream=7, allocator=a)
    assert p.device_ptr == 0x2000
    (size, stream), = a.calls
    assert size == 64 and stream is made[0]
    assert (stream.handle, stream.device_id) == (7, 1)


@pytest.mark.parametrize("bad", [object(), 3, "pool"])
def test_bad_allocators_are_refused(bad):
    with pytest.raises(InvalidOptionError, match=r"^allocator must be a BaseCUDAMemoryManager"):
        memory.allocate(8, package=None, device_id=0, stream=0, allocator=bad)
    from cuweave.linalg.advanced import MatmulOptions

    with pytest.raises(InvalidOptionError, match=r"^allocator must be"):
        MatmulOptions(allocator=bad)


@pytest.mark.parametrize("ret", [object(), type("P", (), {"ptr": "0x10"})()])
def test_allocation_without_a_pointer_is_refused(ret):
    class Alloc(BaseCUDAMemoryManager):
        def memalloc(self, size):
            return ret

    with pytest.raises(InvalidOptionError, match=r"must return an object with an int device_ptr"):
        memory.allocate(8, package=None, device_id=0, stream=0, allocator=Alloc(0, None))


def test_matmul_workspace_comes_from_the_user_allocator(monkeypatch):
    """Under the recording fakes: the workspace of a planned matmul is drawn from
    ``options.allocator`` (given a cuda.core stream), freed once by ``free()``."""
    from cuweave._internal import resources
    from cuweave.linalg.advanced import Matmul
    from tests.fakes.cublaslt import FakeGPU

    gpu = FakeGPU().install(monkeypatch)
    monkeypatch.setattr(resources, "allocate", memory.allocate)  # the real order, not the fake
    monkeypatch.setattr(memory, "_core_stream", lambda handle, dev: ("core-stream", handle))
    freed = []

    class Alloc(BaseCUDAMemoryManagerAsync):
        calls = []

        def memalloc_async(self, size, stream):
            self.calls.append((size, stream))
            ptr = gpu._host_alloc(size)
            return MemoryPointer(ptr, size, lambda: freed.append(ptr))

    alloc = Alloc(0, None)
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16), options={"allocator": alloc})
    mm.plan()
    mm.execute()
    assert alloc.calls and all(s == ("core-stream", 0) for _, s in alloc.calls)
    assert any(size >= 1024 for size, _ in alloc.calls)  # the heuristics' 1 KiB workspace
    mm.free()
    assert len(freed) == len(alloc.calls)


# ---- on the GPU: nvmath's fft example10 pattern, a user allocator over torch / CuPy ----------
# Host operands under CUDA execution always stage through device buffers drawn from the
# allocator (a workspace may be 0 bytes), so both tests run one host-operand call and assert the
# allocator was used, and one device-operand call for the results.
def _torch_allocator():
    torch = pytest.importorskip("torch")

    class TorchAllocator(BaseCUDAMemoryManagerAsync):
        def __init__(self, device_id, logger):
            super().__init__(device_id, logger)
            self.sizes = []

        def memalloc_async(self, size, stream):
            self.sizes.append(size)
            h = int(stream.handle)
            s = (torch.cuda.ExternalStream(h, device=self.device_id) if h else
                 torch.cuda.default_stream(self.device_id))
            with torch.cuda.stream(s):
                t = torch.empty(size, dtype=torch.uint8, device=f"cuda:{self.device_id}")
            return MemoryPointer(t.data_ptr(), size, lambda t=t: None)  # t kept alive

    return TorchAllocator(0, logging.getLogger("test.memory")), torch


def _cupy_allocator():
    cupy = pytest.importorskip("cupy")

    class CupyAllocator(BaseCUDAMemoryManager):
        def __init__(self, device_id, logger):
            super().__init__(device_id, logger)
            self.sizes = []

        def memalloc(self, size):
            self.sizes.append(size)
            return cupy.cuda.alloc(size)  # has .ptr; freed by dropping it

    return CupyAllocator(0, None), cupy


def _host_calls_use(alloc):
    from cuweave.fft import fft
    from cuweave.linalg.advanced import matmul

    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 32)), rng.standard_normal((32, 48))
    d = matmul(a, b, options={"allocator": alloc}, execution="cuda")
    np.testing.assert_allclose(d, a @ b, rtol=1e-10, atol=1e-10)
    used = len(alloc.sizes)
    assert used > 0
    x = rng.standard_normal((8, 256)) + 1j * rng.standard_normal((8, 256))
    y = fft(x, options={"allocator": alloc}, execution="cuda")  # every axis, as nvmath's fft
    np.testing.assert_allclose(y, np.fft.fftn(x), rtol=1e-10, atol=1e-9)
    assert len(alloc.sizes) > used


@pytest.mark.gpu
def test_gpu_matmul_and_fft_with_a_torch_allocator():
    alloc, torch = _torch_allocator()
    _host_calls_use(alloc)
    from cuweave.fft import FFT
    from cuweave.linalg.advanced import Matmul

    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(256, 256, device="cuda", generator=g, dtype=torch.float64)
    b = torch.randn(256, 256, device="cuda", generator=g, dtype=torch.float64)
    with Matmul(a, b, options={"allocator": alloc}) as mm:
        mm.plan()
        d = mm.execute()
    torch.testing.assert_close(d, a @ b)
    x = torch.randn(64, 1024, dtype=torch.complex128, device="cuda", generator=g)
    with FFT(x, axes=[-1], options={"allocator": alloc}) as f:
        f.plan()
        y = f.execute()
    torch.testing.assert_close(y, torch.fft.fft(x))


@pytest.mark.gpu
def test_gpu_matmul_and_fft_with_a_cupy_allocator():
    alloc, cupy = _cupy_allocator()
    _host_calls_use(alloc)
    from cuweave.fft import fft
    from cuweave.linalg.advanced import matmul

    rng = np.random.default_rng(6)
    a = cupy.asarray(rng.standard_normal((300, 200)))
    b = cupy.asarray(rng.standard_normal((200, 100)))
    d = matmul(a, b, options={"allocator": alloc})
    np.testing.assert_allclose(cupy.asnumpy(d), cupy.asnumpy(a) @ cupy.asnumpy(b), rtol=1e-10,
                               atol=1e-10)
    x = cupy.asarray(rng.standard_normal((32, 4096)) + 1j * rng.standard_normal((32, 4096)))
    y = fft(x, axes=[-1], options={"allocator": alloc})
    np.testing.assert_allclose(cupy.asnumpy(y), np.fft.fft(cupy.asnumpy(x)), rtol=1e-10,
                               atol=1e-8)
