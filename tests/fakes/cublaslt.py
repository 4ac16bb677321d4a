"""Recording stand-ins for cuBLASLt, the CUDA runtime helpers and torch's CUDA side.

:class:`FakeGPU` replaces them for one test (``install(monkeypatch)``, or the :func:`gpu`
fixture): device "tensors" are fake ``torch`` objects that only carry pointers, so a test checks
what the engine *calls* (descriptor setters, cache hits, pointers passed to ``cublasLtMatmul``),
never numbers. Host memory stands in for device memory, so staged copies really move bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import sys
import types

import pytest

from cuweave._bindings import cublaslt as lt
from cuweave._internal import cuda, pinned, resources, staging
from cuweave.linalg.advanced import _cuda
from cuweave.linalg.advanced._function import plan_cache

__all__ = ["FakeGPU", "FakeTensor", "gpu", "as_int"]


# ---------------------------------------------------------------- fake torch (CUDA side only)
class _DType:
    def __init__(self, name):
        self._name = name

    def __str__(self):
        return f"torch.{self._name}"

    __repr__ = __str__


def _c_strides(shape):
    acc, out = 1, []
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


class FakeTensor:
    """A CUDA tensor as far as cuweave looks at one (pointer, shape, strides, dtype)."""

    def __init__(self, shape, dtype, ptr, strides=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._ptr = ptr
        self._strides = tuple(strides) if strides is not None else _c_strides(self.shape)
        self.is_cuda = True
        self.device = "cuda:0"
        self.requires_grad = False

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def get_device(self):
        return 0

    def is_conj(self):
        return False

    def is_neg(self):
        return False

    def permute(self, inv):
        return FakeTensor([self.shape[i] for i in inv], self.dtype, self._ptr,
                          [self._strides[i] for i in inv])

    def t(self):
        return self.permute((1, 0))

    def expand(self, shape):  # a one-element tensor broadcast to ``shape`` (strides 0)
        return FakeTensor(shape, self.dtype, self._ptr, (0,) * len(shape))

    def record_stream(self, s):
        pass

    def copy_(self, src):  # a device copy (c broadcast into the result): nothing to move
        return self


FakeTensor.__module__ = "torch"


def _fake_torch():
    mod = types.ModuleType("torch")
    mod.__path__ = []
    counter = itertools.count(1)
    for name in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                 "uint8", "float8_e4m3fn", "float8_e5m2"):
        setattr(mod, name, _DType(name))

    def empty(*size, dtype=None, device=None):  # torch.empty(2, 3) and torch.empty((2, 3))
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else size
        return FakeTensor(shape, dtype, 0x7F0000000000 + next(counter) * 0x100000)

    def empty_strided(size, stride, dtype=None, device=None):
        return FakeTensor(size, dtype, 0x7F0000000000 + next(counter) * 0x100000, stride)

    def empty_like(t):  # torch's rule for a tensor that is not dense: C-contiguous
        return FakeTensor(t.shape, t.dtype, 0x7F0000000000 + next(counter) * 0x100000)

    mod.empty = empty
    mod.empty_strided = empty_strided
    mod.empty_like = empty_like
    mod.allocations = counter
    mod.Tensor = FakeTensor
    mod._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda dev: 0)
    stream = types.SimpleNamespace(cuda_stream=0)
    mod.cuda = types.SimpleNamespace(current_stream=lambda dev=None: stream,
                                     default_stream=lambda dev=None: stream,
                                     stream=lambda s: contextlib.nullcontext(),
                                     ExternalStream=lambda s, device=None: stream)
    mod.device = lambda kind, index=None: f"{kind}:{index}"
    return mod


# ---------------------------------------------------------------- native stubs
class _Mem:
    def __init__(self, ptr, size):
        self.device_ptr, self.size = ptr, size

    def free(self):
        pass


class FakeGPU:
    """Installs the stubs (``install(monkeypatch)``); records cuBLASLt calls.

    ``matmul_calls`` holds the integer arguments of each ``cublasLtMatmul`` call;
    ``set_calls`` each ``matmul_desc_set_attribute(desc, attr, value)``.
    ``memory`` maps fake device/pinned addresses to host buffers, so the staging code's
    ``cuda.memcpy_async`` is a plain ``ctypes.memmove`` between real host memory.
    """

    def __init__(self, native_fn=None):
        self.matmul_calls = []
        self.set_calls = []
        self.pref_calls = []  # (attr, value) of each preference_set_attribute
        #: handle -> (cudaDataType, rows, cols, ld) of each matrix_layout_create
        self.layouts = {}
        self.waits = []  # (waiting stream, stream recorded on) of each cuStreamWaitEvent
        self.syncs = []  # streams passed to cuda.synchronize
        self.set_devices = []  # cuda.set_device calls
        self.capturing = set()  # streams capturing a CUDA graph (cuda.is_capturing)
        self.devices = 1
        self.on_matmul = None  # optional hook(args) run when a matmul "executes"
        self.torch = _fake_torch()
        self._native_fn = native_fn
        self._keep = []
        self._queue = []  # copies queued on the (single, in-order) fake stream
        self._done = 0  # how many of them have run
        gpu = self

        class Event:
            def __init__(self, timing=True):
                self.upto = 0
                self._h = self

            def record(self, stream=0):
                self.upto = len(gpu._queue)
                self.stream = stream
                return self

            def synchronize(self):
                gpu._run_until(self.upto)

        self.Event = Event

    def _memcpy_async(self, dst, src, nbytes, stream):
        self._queue.append((dst, src, nbytes))

    def _run_until(self, upto):
        """Run the queued copies (DMA is deferred until someone waits, like a busy GPU)."""
        while self._done < upto:
            dst, src, n = self._queue[self._done]
            ctypes.memmove(dst, src, n)
            self._done += 1

    def _host_alloc(self, nbytes):
        buf = ctypes.create_string_buffer(max(int(nbytes), 1))
        self._keep.append(buf)
        return ctypes.addressof(buf)

    def _alloc(self, nbytes, **_):
        return _Mem(self._host_alloc(nbytes), nbytes)

    def _matmul_fn(self):
        if self._native_fn is not None:
            return self._native_fn

        def fn(*args):
            self._run_until(len(self._queue))  # the kernel runs after the queued uploads
            args = tuple(as_int(a) for a in args)
            self.matmul_calls.append(args)
            if self.on_matmul is not None:
                self.on_matmul(args)
            return 0

        return fn

    def _desc_set(self, desc, attr, ref, size):
        """The untyped ``cublasLtMatmulDescSetAttribute`` of pointer attributes (a ``byref``
        of one ``c_void_p``), recorded as the typed setter's calls are."""
        assert as_int(size) == ctypes.sizeof(ctypes.c_void_p)
        self.set_calls.append((as_int(desc), as_int(attr), as_int(ref._obj)))
        return 0

    def install(self, mp) -> FakeGPU:
        handles = itertools.count(0x1000, 0x10)
        mp.setitem(sys.modules, "torch", self.torch)
        for name in ("create", "matmul_desc_create", "preference_create"):
            mp.setattr(lt, name, lambda *a, **k: next(handles))

        def layout_create(dtype, rows, cols, ld):
            h = next(handles)
            self.layouts[h] = (int(dtype), rows, cols, ld)
            return h

        mp.setattr(lt, "matrix_layout_create", layout_create)
        for name in ("matrix_layout_set_attribute", "matrix_layout_destroy",
                     "matmul_desc_destroy", "preference_destroy"):
            mp.setattr(lt, name, lambda *a, **k: None)
        mp.setattr(lt, "preference_set_attribute",
                   lambda pref, attr, value: self.pref_calls.append((int(attr), value)))
        mp.setattr(lt, "matmul_desc_set_attribute",
                   lambda desc, attr, value: self.set_calls.append(
                       (desc, int(attr), as_int(value))))
        mp.setattr(lt, "get_version", lambda: 130100)

        def heuristic(*a, **k):
            r = lt.HeuristicResult()
            r.workspaceSize = 1024
            return [r]

        mp.setattr(lt, "algo_get_heuristic", heuristic)
        mp.setattr(_cuda, "_raw_matmul_function", self._matmul_fn)
        mp.setattr(_cuda, "_raw_desc_set_function", lambda: self._desc_set)
        mp.setattr(_cuda, "_handles", {})
        mp.setattr(_cuda, "allocate", self._alloc)
        mp.setattr(resources, "allocate", self._alloc)
        def synchronize(s):
            self.syncs.append(s)
            self._run_until(len(self._queue))

        def wait(stream, event, flags):
            self.waits.append((stream, event.stream))
            return (0,)

        def ctx_sync():
            synchronize("device")
            return (0,)

        driver = types.SimpleNamespace(cuStreamWaitEvent=wait, cuCtxSynchronize=ctx_sync)
        for name, fn in (("set_device", self.set_devices.append), ("current_device", lambda: 0),
                         ("total_memory", lambda d: 1 << 34), ("driver", lambda: driver),
                         ("device_count", lambda: self.devices),
                         ("is_available", lambda: True), ("require", lambda *a: None),
                         ("synchronize", synchronize),
                         ("is_capturing", lambda stream: stream in self.capturing),
                         ("host_alloc", self._host_alloc), ("host_free", lambda p: None),
                         ("Event", self.Event), ("memcpy_async", self._memcpy_async)):
            mp.setattr(cuda, name, fn)
        mp.setattr(staging, "_SHARED", [])  # a stager over these fake pinned buffers
        mp.setattr(pinned, "_POOL", [pinned.PinnedPool(256 << 20)])  # result blocks: fake too
        mp.setattr(pinned, "_REGISTERED", [pinned.Registrations(1 << 30)])
        self.registered = []  # (ptr, nbytes) of each cuMemHostRegister; unregistered: removed
        mp.setattr(cuda, "host_register", lambda p, n: self.registered.append((p, n)) or True)
        mp.setattr(cuda, "host_unregister", lambda p: self.registered.remove(
            next(r for r in self.registered if r[0] == p)))
        # page-locked host memory as the driver reports it: the registered buffers (the fake
        # pool's blocks are ctypes buffers the driver never saw)
        mp.setattr(cuda, "page_locked", lambda p, n: any(
            r[0] <= p and p + n <= r[0] + r[1] for r in self.registered))
        plan_cache.clear()
        mp.setattr(plan_cache, "hits", 0)
        mp.setattr(plan_cache, "misses", 0)
        return self

    def tensor(self, *shape, dtype="float32", order="C", offset=0):
        t = self.torch.empty(shape if order == "C" else shape[::-1],
                             dtype=getattr(self.torch, dtype))
        t._ptr += offset  # offset > 0: a view starting inside an allocation (less aligned)
        return t if order == "C" else t.t()


def as_int(v):
    if isinstance(v, ctypes.c_void_p):
        return v.value or 0
    if isinstance(v, ctypes._SimpleCData):
        return v.value
    return v


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGPU().install(monkeypatch)
    yield fake
    plan_cache.clear()
