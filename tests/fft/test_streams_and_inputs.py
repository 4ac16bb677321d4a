"""Streams, shared buffers and argument checking of cuweave.fft, with CUDA stubbed where needed.

The stream tests run the cuFFT path against the recording fakes of ``tests.fakes.cufft`` (torch CPU
tensors pose as CUDA tensors; host operands are staged through a fake stager): they check which
stream each call runs on and how the object's shared buffers are ordered across streams, never
numbers (the GPU tests check results).
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal import staging
from cuweave._internal.errors import InvalidOptionError, InvalidStateError
from tests.fakes.cufft import fake_cuda
from tests.references import rel_l2, rng_array

torch = pytest.importorskip("torch")
run_mod = sys.modules["cuweave.fft._run"]  # where the run allocates and stages


class _FakeStager:
    """Records transfers (the data are not moved: only the streams matter here)."""

    def __init__(self):
        self.calls = []

    def upload(self, host, ptr, stream, direct=False):
        self.calls.append(("upload", stream))

    def download(self, ptr, dst, stream):
        self.calls.append(("download", stream))


@pytest.fixture
def fake():
    with fake_cuda() as f:
        yield f


@pytest.fixture
def outputs(monkeypatch):
    """Stands in for ``empty`` (outputs on an explicit stream); records the streams asked for."""
    seen = []

    def fake_empty(ref, shape, dtype, *, perm=None, stream=0, allocator=None):
        seen.append(stream)
        perm = range(len(shape)) if perm is None else perm
        t = torch.empty([shape[p] for p in perm], dtype=getattr(torch, dtype))
        return types.SimpleNamespace(obj=t, ptr=t.data_ptr())

    monkeypatch.setattr(run_mod, "empty", fake_empty)
    return seen


@pytest.fixture
def stager(monkeypatch):
    st = _FakeStager()
    monkeypatch.setattr(run_mod, "shared_stager", lambda: st)

    def no_private_stager(*a, **k):
        raise AssertionError("an FFT object must use the shared stager")

    monkeypatch.setattr(staging, "Stager", no_private_stager)
    return st


def _c64(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.complex64, generator=g)


def _streams(fake):
    return [s for _, s in fake.set_streams]


# ---- 1: every function-form call resolves its own stream ----------------------------------------
def test_function_form_does_not_reuse_an_earlier_calls_stream(fake, stager):
    x = rng_array((4, 16), "complex64")
    F.fft(x, execution="cuda", stream=0x77)
    F.fft(x, execution="cuda")  # same cached plan: must run on the default stream, not 0x77
    F.fft(x, execution="cuda", stream=0x88)
    assert len(fake.execs) == 3 and fake.calls["cufftCreate"] == 1
    assert _streams(fake) == [0x77, 0, 0x88]
    assert [s for _, s in stager.calls] == [0x77, 0x77, 0, 0, 0x88, 0x88]


def test_torch_function_form_follows_the_current_stream_after_an_explicit_one(fake, outputs):
    x = _c64(8, 64)
    F.fft(x, axes=(1,), stream=0x99)
    fake.stream = 0x5
    F.fft(x, axes=(1,))
    F.fft(x, axes=(1,))
    assert _streams(fake) == [0x99, 0x5]
    assert len(fake.execs) == 3


def test_release_operand_drops_the_stored_stream(fake, stager):
    x = rng_array((4, 16), "complex64")
    holder = types.SimpleNamespace(__cuda_stream__=lambda: (0, 0x55))
    f = F.FFT(x, execution="cuda", stream=holder)
    f.plan()
    f.execute()
    assert f._stored.obj is holder and f._call.stored == 0x55
    f.release_operand()
    assert f._stored is None and f._call is None
    f.reset_operand(x)
    f.execute()  # no stored stream any more: the current (default) stream
    f.reset_operand(x, stream=0x66)
    f.execute()
    assert _streams(fake) == [0x55, 0, 0x66]
    f.free()


def test_objects_share_the_process_stager(fake, stager):
    x = rng_array((4, 16), "complex64")
    y = rng_array((2, 8), "complex128")
    with F.FFT(x, execution="cuda") as a, F.FFT(y, execution="cuda") as b:
        a.plan()
        b.plan()
        a.execute()
        b.execute()
    assert [k for k, _ in stager.calls] == ["upload", "download"] * 2


# ---- 2: the shared work area and C2R scratch are ordered across streams --------------------------
def test_buffers_are_ordered_when_the_stream_changes(fake):
    fake.workspace = 4096
    f = F.FFT(_c64(8, 256), axes=(1,))
    f.plan()
    f.execute()
    f.execute()
    assert fake.ops("wait", "record", "sync") == []  # one stream: nothing to order
    (alloc,) = fake.ops("alloc")
    assert alloc[2:] == (4096, 0)
    fake.stream = 0x1234
    f.execute()
    f.execute()  # the hot path: orders only when the stream changes
    (rec,), (wait,) = fake.ops("record"), fake.ops("wait")
    assert rec[2] == 0 and wait[1:] == (0x1234, rec[1])
    assert fake.log.index(rec) < fake.log.index(wait)
    n = len(fake.log)
    f.execute(release_workspace=True)  # allocated on 0, last used on 0x1234: wait, then free
    tail = [e[0] for e in fake.log[n:]]
    assert tail.index("sync") < tail.index("free")
    assert ("sync", 0x1234) in fake.log[n:]
    n = len(fake.log)
    f.execute()  # reallocated on 0x1234 (its only user): the free is already stream-ordered
    f.release_workspace()
    assert [e[0] for e in fake.log[n:]].count("sync") == 0
    assert [e[0] for e in fake.log[n:]].count("free") == 1
    f.free()


def test_explicit_stream_is_marked_and_never_touched_again(fake, outputs):
    fake.workspace = 4096
    f = F.FFT(_c64(8, 256), axes=(1,))
    f.plan()
    f.execute()  # stream 0
    n = len(fake.log)
    f.execute(stream=0x4321)  # explicit: may be destroyed right after the call
    assert fake.log[n:].count(("wait", 0x4321, 1)) == 1
    records = fake.ops("record")
    assert [r[2] for r in records] == [0, 0x4321]  # before the switch, and the end-of-call mark
    n = len(fake.log)
    f.execute()  # back on 0: waits on the mark, records nothing on 0x4321
    assert fake.ops("record") == records
    assert ("wait", 0, records[-1][1]) in fake.log[n:]
    f.free()  # allocated on 0, last used on 0: ordered free, no sync
    assert not [e for e in fake.log[n:] if e[0] in ("sync", "event_sync")]


def test_free_after_an_explicit_stream_waits_on_its_event(fake, outputs):
    fake.workspace = 4096
    f = F.FFT(_c64(8, 256), axes=(1,))
    f.plan()
    f.execute()  # allocates on 0
    f.execute(stream=0x4321)
    n = len(fake.log)
    f.free()
    kinds = [e[0] for e in fake.log[n:]]
    assert "sync" not in kinds and kinds.index("event_sync") < kinds.index("free")


def test_c2r_scratch_copy_is_ordered_too(fake):
    x = torch.fft.rfft(torch.randn(4, 32), dim=1)
    f = F.FFT(x, axes=(1,), options={"fft_type": "C2R"})
    f.plan()
    f.execute()
    fake.stream = 0x77
    f.execute()
    (alloc,) = fake.ops("alloc")  # the scratch copy of the input
    memcpys = fake.ops("memcpy")
    assert [m[1] for m in memcpys] == [alloc[1]] * 2 and [m[4] for m in memcpys] == [0, 0x77]
    (wait,) = fake.ops("wait")
    assert fake.log.index(wait) < fake.log.index(memcpys[1])
    f.free()


def test_plan_cache_eviction_orders_the_free(fake, outputs):
    fake.workspace = 1024
    F.plan_cache.clear()
    x = _c64(4, 64)
    F.fft(x, axes=(1,), stream=0x10)
    n = len(fake.log)
    F.plan_cache.clear()  # evicts: the buffers were allocated and last used on 0x10
    assert [e[0] for e in fake.log[n:]] == ["free"]


# ---- 4: the plan's device is made current for each execution, the caller's restored ---------
def test_device_is_made_current_and_restored(fake):
    f = F.FFT(_c64(8, 64), axes=(1,))
    f.plan()
    F.fft(_c64(8, 64), axes=(1,))  # plans and caches the function form's object
    n = len(fake.log)
    for _ in range(3):  # general path once, then the hot path
        f.execute()
    assert f._ready is not None and fake.ops("set_device") == []  # already current: no switch
    fake.device = 1  # the caller works on another device
    f.execute()  # hot path
    f.execute(direction="inverse")  # general path
    F.fft(_c64(8, 64), axes=(1,))  # function form
    assert fake.log[n:] and fake.ops("set_device") == [("set_device", 0), ("set_device", 1)] * 3
    assert fake.device == 1 and len(fake.execs) == 7
    fake.device = None  # no current context: the plan's device stays current afterwards
    f.execute()
    assert fake.device == 0
    f.free()


# ---- explicit streams allocate their outputs ordered on that stream -----------------------------
def test_explicit_stream_output_is_allocated_on_that_stream(fake, outputs):
    seen = outputs
    f = F.FFT(_c64(8, 64), axes=(1,))
    f.plan()
    f.execute()  # current stream: the package's fast allocator
    y = f.execute(stream=0x3131)
    assert seen == [0x3131] and fake.execs[-1][3] == y.data_ptr()
    F.fft(_c64(8, 64), axes=(1,), stream=0x3232)
    assert seen == [0x3131, 0x3232]
    f.free()


# ---- 5: bad arguments raise typed errors naming the parameter -----------------------------------
def test_int_axes_means_one_axis():
    x = rng_array((4, 16), "complex128")
    y = F.fft(x, axes=1)
    assert rel_l2(y, np.fft.fft(x, axis=1)) < 1e-12
    assert F.FFT.create_key(x, axes=1) == F.FFT.create_key(x, axes=(1,))
    z = F.fft(x, axes=np.int64(-1))
    assert rel_l2(z, np.fft.fft(x, axis=-1)) < 1e-12


@pytest.mark.parametrize("kwargs, match", [
    ({"axes": "a"}, "axes must be an int or a sequence of ints"),
    ({"axes": [1.5]}, "axes must be an int or a sequence of ints"),
    ({"axes": (True,)}, "axes must be an int or a sequence of ints"),
    ({"axes": ([1],)}, "axes must be an int or a sequence of ints"),
    ({"axes": 1.0}, "axes must be an int or a sequence of ints"),
    ({"direction": [1]}, "direction must be"),
    ({"direction": "sideways"}, "direction must be"),
    ({"direction": True}, "direction must be"),
    ({"stream": "bad"}, "stream must be"),
])
def test_bad_arguments_raise_invalid_option(kwargs, match):
    x = rng_array((4, 16), "complex64")
    F.fft(x)  # a cached plan must not hide the check
    with pytest.raises(InvalidOptionError, match=match):
        F.fft(x, **kwargs)


def test_torch_fast_path_rejects_bad_axes(fake):
    x = _c64(4, 16)
    F.fft(x, axes=(1,))
    with pytest.raises(InvalidOptionError, match="axes"):
        F.fft(x, axes=([1],))
    with pytest.raises(InvalidOptionError, match="direction"):
        F.fft(x, axes=(1,), direction=[1])


def test_stateful_cpu_object_validates_streams():
    x = rng_array((4, 16), "complex64")
    with pytest.raises(InvalidOptionError, match="stream"):
        F.FFT(x, stream="bad")
    with F.FFT(x, stream=0) as f:
        with pytest.raises(InvalidOptionError, match="stream"):
            f.plan(stream=object())
        f.plan()
        with pytest.raises(InvalidOptionError, match="stream"):
            f.execute(stream="bad")
        with pytest.raises(InvalidOptionError, match="stream"):
            f.reset_operand(x, stream=-1)
        with pytest.raises(InvalidOptionError, match="direction"):
            f.execute(direction={"forward"})
        assert rel_l2(f.execute(stream=0), np.fft.fft2(x)) < 1e-5


# ---- 6: free() drops the operand; get_key needs a live object ------------------------------------
def test_get_key_after_free_raises():
    x = rng_array((4, 16), "complex64")
    f = F.FFT(x)
    key = f.get_key()
    assert key == F.FFT.create_key(x) == F.FFT.create_key(x, axes=(0, -1))
    f.free()
    assert f._call is None
    with pytest.raises(InvalidStateError, match="free"):
        f.get_key()
    f.free()  # still idempotent
