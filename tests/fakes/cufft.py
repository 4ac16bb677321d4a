"""Run cuweave.fft's cuFFT path on a machine without CUDA (host-overhead tests and profiling).

:func:`fake_cuda` patches, for the duration of a ``with`` block:

- the cuFFT function tables of :mod:`cuweave._bindings.cufft` with recording Python no-ops
  (:class:`FakeCufft`), or, with ``native=PATH``, with a compiled stand-in library exporting the
  same symbols (so ctypes conversion costs are real);
- torch CPU tensors to pose as CUDA tensors of device 0 (``is_cuda``, ``get_device``), the
  current raw stream (``FakeCufft.stream``, settable), ``torch.cuda.current_stream``, and the
  device the hot-path allocator uses (``"cpu"``);
- the CUDA runtime helpers the plan touches (``require``, ``set_device``,
  ``compute_capability``, ``synchronize``, ``memcpy_async``, events and stream waits) with
  recorders (``FakeCufft.log``), the device allocations of the object's buffers (fake
  addresses; frees are logged) and the NVRTC compilation of the fused ``norm`` scale callback.

Results are therefore CPU tensors with uninitialized contents: only the calls are meaningful.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes

import pytest

_SOURCE = r"""
#include <stddef.h>
static int next_h = 1;
int cufftGetVersion(int *v) { *v = 12000; return 0; }
int cufftCreate(int *h) { *h = next_h++; return 0; }
int cufftDestroy(int h) { return 0; }
int cufftMakePlanMany64(int h, int r, long long *n, long long *i, long long a, long long b,
    long long *o, long long c, long long d, int t, long long bt, size_t *ws) { *ws = 0; return 0; }
int cufftXtMakePlanMany(int h, int r, long long *n, long long *i, long long a, long long b,
    int it, long long *o, long long c, long long d, int ot, long long bt, size_t *ws, int et)
    { *ws = 0; return 0; }
int cufftSetStream(int h, void *s) { return 0; }
int cufftSetAutoAllocation(int h, int a) { return 0; }
int cufftGetSize(int h, size_t *ws) { *ws = 0; return 0; }
int cufftSetWorkArea(int h, void *p) { return 0; }
int cufftXtSetJITCallback(int h, const char *n, const void *p, size_t s, int t, void **info)
    { return 0; }
int cufftXtExec(int h, void *i, void *o, int d) { return 0; }
int cufftExecC2C(int h, void *i, void *o, int d) { return 0; }
int cufftExecZ2Z(int h, void *i, void *o, int d) { return 0; }
int cufftExecR2C(int h, void *i, void *o) { return 0; }
int cufftExecD2Z(int h, void *i, void *o) { return 0; }
int cufftExecC2R(int h, void *i, void *o) { return 0; }
int cufftExecZ2D(int h, void *i, void *o) { return 0; }
"""


def build_native(directory: str) -> str:
    """Compile the stand-in libcufft into ``directory`` (needs ``cc``); returns its path."""
    import os
    import subprocess

    src = os.path.join(directory, "fakecufft.c")
    lib = os.path.join(directory, "libfakecufft.so")
    with open(src, "w") as f:
        f.write(_SOURCE)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    return lib


def _value(p):
    """An int from whatever ctypes or a caller passed as a pointer argument."""
    if p is None:
        return 0
    return int(getattr(p, "value", p) or 0)


def _store(ref, value) -> None:
    ref._obj.value = value  # ctypes.byref(...) exposes the referenced object as ._obj


class FakeCufft:
    """Recording stand-ins for the cuFFT entry points (all succeed).

    ``calls`` counts calls by name; ``execs`` lists ``(name, handle, in, out, direction)``;
    ``set_streams`` lists ``(handle, stream)``; ``stream`` is the current stream torch reports;
    ``device`` the thread's current device (``set_device`` changes it).
    ``log`` lists the runtime calls in order: ``("set_device", id)``, ``("alloc", ptr, nbytes,
    stream)``, ``("free", ptr)``, ``("record", event, stream)``, ``("wait", stream, event)``,
    ``("event_sync", event)``, ``("sync", stream)``, ``("memcpy", dst, src, nbytes, stream)``.
    ``capturing`` holds the streams that capture a CUDA graph (``cuda.is_capturing``).
    """

    def __init__(self):
        self.calls = collections.Counter()
        self.execs = []
        self.set_streams = []
        self.stream = 0
        self.workspace = 0
        self.exec_status = 0
        self._next = 100
        self.log = []
        self.device = 0  # the thread's current device
        self._next_ptr = 0x10000
        self.capturing = set()

    def set_device(self, device_id) -> None:
        self.log.append(("set_device", device_id))
        self.device = device_id

    def ops(self, *kinds) -> list:
        """The entries of :attr:`log` whose kind is among ``kinds``."""
        return [e for e in self.log if e[0] in kinds]

    def allocate(self, nbytes, *, package, device_id, stream, allocator=None):
        from cuweave._internal.memory import MemoryPointer

        ptr = self._next_ptr
        self._next_ptr += -(-max(nbytes, 1) // 256) * 256 + 256
        self.log.append(("alloc", ptr, nbytes, stream))
        return MemoryPointer(ptr, nbytes, lambda: self.log.append(("free", ptr)))

    def event_class(self):
        fake = self

        class FakeEvent:
            count = 0

            def __init__(self, timing=True):
                FakeEvent.count += 1
                self._h = FakeEvent.count

            def record(self, stream=0):
                fake.log.append(("record", self._h, stream))
                return self

            def synchronize(self):
                fake.log.append(("event_sync", self._h))

        return FakeEvent

    def table(self) -> dict:
        from cuweave._bindings import cufft

        return {name: self._fn(name) for name in cufft._SIGNATURES}

    def _fn(self, name):
        def fn(*args):
            self.calls[name] += 1
            return self._dispatch(name, args)

        fn.__name__ = name
        return fn

    def _dispatch(self, name, args) -> int:
        if name == "cufftCreate":
            self._next += 1
            _store(args[0], self._next)
        elif name in ("cufftMakePlanMany64", "cufftXtMakePlanMany"):
            _store(args[11 if name == "cufftMakePlanMany64" else 12], self.workspace)
        elif name == "cufftGetSize":
            _store(args[1], self.workspace)
        elif name == "cufftGetVersion":
            _store(args[0], 12000)
        elif name == "cufftSetStream":
            self.set_streams.append((int(args[0]), _value(args[1])))
        elif name.startswith(("cufftXtExec", "cufftExec")):
            self.execs.append((name, int(_value(args[0])), _value(args[1]), _value(args[2]),
                               int(_value(args[3])) if len(args) > 3 else None))
            return self.exec_status
        return 0


class _FakeStream:
    def __init__(self, ptr):
        self.cuda_stream = ptr


@contextlib.contextmanager
def fake_cuda(native: str | None = None):
    """Context manager yielding a :class:`FakeCufft` (see module docstring)."""
    import torch

    from cuweave._bindings import cufft
    from cuweave._internal import cuda, packages, pinned, resources
    from cuweave.fft import _callbacks

    fake = FakeCufft()
    with pytest.MonkeyPatch.context() as mp:
        if native is None:
            table = fake.table()
            mp.setattr(cufft, "_funcs", table)
            mp.setattr(cufft, "_bare", dict(table))
        else:
            mp.setattr(cufft, "_funcs", {})
            mp.setattr(cufft, "_bare", {})
            mp.setattr(cufft, "load_library", lambda name: ctypes.CDLL(native))
        mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
        mp.setattr(torch.Tensor, "get_device", lambda self: 0)
        mp.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: fake.stream,
                   raising=False)
        mp.setattr(torch.cuda, "current_stream", lambda device=None: _FakeStream(fake.stream))
        mp.setattr(packages.TORCH, "device_type", "cpu")
        mp.setattr(cuda, "set_device", fake.set_device)
        mp.setattr(cuda, "current_device", lambda: fake.device)
        mp.setattr(cuda, "require", lambda device_id=0: None)
        mp.setattr(cuda, "synchronize", lambda stream: fake.log.append(("sync", stream)))
        mp.setattr(cuda, "memcpy_async", lambda dst, src, n, stream: fake.log.append(
            ("memcpy", dst, src, n, stream)))
        mp.setattr(cuda, "Event", fake.event_class())
        mp.setattr(cuda, "pointer_space", lambda ptr: ("device", fake.device))
        mp.setattr(resources, "allocate", fake.allocate)
        mp.setattr(cuda, "stream_wait_event", lambda stream, ev: fake.log.append(
            ("wait", stream, ev._h)))
        mp.setattr(cuda, "compute_capability", lambda device_id=0: (9, 0))
        mp.setattr(cuda, "is_capturing", lambda stream: stream in fake.capturing)
        mp.setattr(_callbacks, "_nvrtc_ltoir", lambda src, cc: b"fake-ltoir")
        # no page-locked results or operands: there is no pinned memory to fake here
        mp.setattr(pinned, "_POOL", [pinned.PinnedPool(0)])
        mp.setattr(pinned, "_REGISTERED", [pinned.Registrations(0)])
        try:
            yield fake
        finally:
            from cuweave.fft import plan_cache

            plan_cache.clear()  # plans of fake handles must not outlive the fakes
