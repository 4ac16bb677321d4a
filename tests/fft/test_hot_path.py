"""The cuFFT hot path's behaviour (which native calls, with which arguments), with CUDA stubbed.

torch CPU tensors pose as CUDA tensors and cuFFT is a recording fake (see ``tests.fakes.cufft``):
these tests check calls and bookkeeping, never numbers (the GPU tests check results).
"""

from __future__ import annotations

import pytest

import cuweave.fft as F
from cuweave._bindings import cufft
from cuweave._internal.cache import PlanCache
from cuweave._internal.errors import CufftError, InvalidStateError
from tests.fakes.cufft import fake_cuda

torch = pytest.importorskip("torch")


@pytest.fixture
def fake():
    with fake_cuda() as f:
        yield f


def _c64(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.complex64, generator=g)


def test_set_stream_only_when_the_current_stream_changes(fake):
    x = _c64(8, 256)
    f = F.FFT(x, axes=(1,))
    f.plan()
    for _ in range(5):
        f.execute()
    assert fake.calls["cufftSetStream"] == 1 and fake.set_streams[0][1] == 0
    fake.stream = 0x1234
    f.execute()
    f.execute()
    fake.stream = 0
    f.execute()
    assert [s for _, s in fake.set_streams] == [0, 0x1234, 0]
    assert fake.calls["cufftXtExec"] == 8
    f.plan()  # a new plan handle has no stream set yet
    f.execute()
    assert fake.calls["cufftSetStream"] == 4
    f.free()


def test_execute_passes_operand_and_fresh_output(fake):
    x = _c64(8, 256)
    f = F.FFT(x, axes=(1,))
    f.plan()
    ys = [f.execute() for _ in range(3)]
    assert len({y.data_ptr() for y in ys}) == 3  # a new result each call (none kept alive)
    for (name, handle, i, o, d), y in zip(fake.execs, ys):
        assert (name, i, o, d) == ("cufftXtExec", x.data_ptr(), y.data_ptr(), -1)
        assert handle == f._plan.cuda_plan.handle
        assert y.shape == x.shape and y.dtype == torch.complex64
    f.execute(direction="inverse")
    assert fake.execs[-1][4] == 1
    x2 = _c64(8, 256, seed=1)
    f.reset_operand(x2)
    f.execute()
    assert fake.execs[-1][2] == x2.data_ptr()
    f.release_operand()
    with pytest.raises(InvalidStateError, match="reset_operand"):
        f.execute()
    f.reset_operand(x)
    f.execute()
    assert fake.execs[-1][2] == x.data_ptr()
    f.free()


@pytest.mark.parametrize("shape, axes, kind", [
    ((8, 256), (1,), "fft"), ((256, 8), (0,), "fft"), ((4, 6, 10), (0, 2), "fft"),
    ((8, 256), (1,), "rfft"), ((6, 10), (0,), "rfft"),
])
def test_results_have_the_planned_layout(fake, shape, axes, kind):
    x = _c64(*shape) if kind == "fft" else torch.randn(*shape)
    opts = {"fft_type": "R2C"} if kind == "rfft" else None
    f = F.FFT(x, axes=axes, options=opts)
    f.plan()
    out_shape, out_strides = f.get_output_layout()
    for _ in range(2):  # the first call takes the general path, the second the hot one
        y = f.execute()
        assert tuple(y.shape) == tuple(out_shape) and tuple(y.stride()) == tuple(out_strides)
        assert fake.execs[-1][3] == y.data_ptr()
    f.free()


def test_dropping_the_object_destroys_the_plan_without_gc(fake):
    import gc

    f = F.FFT(_c64(8, 256), axes=(1,))
    f.plan()
    f.execute()
    assert f._ready is not None
    gc.disable()
    try:
        del f  # the hot closure must not keep the object alive through a cycle
        assert fake.calls["cufftDestroy"] == 1
    finally:
        gc.enable()


def test_exec_failure_raises_from_the_hot_path(fake):
    f = F.FFT(_c64(8, 256), axes=(1,))
    f.plan()
    f.execute()
    fake.exec_status = 5  # CUFFT_INTERNAL_ERROR
    with pytest.raises(CufftError, match="cufftXtExec"):
        f.execute()
    f.free()


def test_function_form_plans_once_and_runs_each_operand(fake):
    F.plan_cache.clear()
    xs = [_c64(8, 256, seed=s) for s in range(3)]
    hits = F.plan_cache.hits
    ys = [F.fft(x, axes=(1,)) for x in xs]
    assert fake.calls["cufftCreate"] == 1 and F.plan_cache.hits == hits + 2
    assert [e[2] for e in fake.execs] == [x.data_ptr() for x in xs]
    assert [e[3] for e in fake.execs] == [y.data_ptr() for y in ys]
    assert fake.calls["cufftSetStream"] == 1
    for x in xs:  # alternating transforms: one plan each, inverse direction for ifft
        F.ifft(F.fft(x, axes=(1,)), axes=(1,))
    assert fake.calls["cufftCreate"] == 2 and len(F.plan_cache) == 2
    assert [e[4] for e in fake.execs[3:]] == [-1, 1] * 3
    F.plan_cache.clear()
    assert fake.calls["cufftDestroy"] == 2 and len(F.plan_cache) == 0


def test_fused_norm_takes_the_hot_path(fake):
    F.plan_cache.clear()
    x = _c64(8, 256)
    for _ in range(3):
        F.ifft(x, axes=(1,), norm="backward")
    assert fake.calls["cufftXtSetJITCallback"] == 1  # the scale, attached once as an epilog
    assert fake.calls["cufftXtExec"] == 3 and fake.calls["cufftCreate"] == 1
    obj = F.plan_cache.pop(("torch", x.dtype, x.shape, x.stride(), 0, (1,), "C2C",
                            F.FFTDirection.INVERSE, "backward"))
    assert obj is not None and obj.run is not None and obj.cuda_plan.unfused_scale == 1.0
    obj.free()


def test_function_form_with_callbacks_hits_the_cache(fake):
    from cuweave._internal.errors import InvalidOptionError
    from cuweave.fft._callbacks import LTOIR

    F.plan_cache.clear()
    code = LTOIR(b"fake-epilog-ltoir")
    x = _c64(8, 256)
    hits = F.plan_cache.hits
    for _ in range(3):  # a new dict each call, as users write it
        F.fft(x, axes=(1,), epilog={"ltoir": code, "data": 0x100})
    assert fake.calls["cufftCreate"] == 1 and F.plan_cache.hits == hits + 2
    assert fake.calls["cufftXtSetJITCallback"] == 1
    F.fft(x, axes=(1,), epilog={"ltoir": code, "data": 0x200})  # other user data: a new plan
    F.fft(x, axes=(1,), epilog=F.DeviceCallable(ltoir=code, data=0x200))  # the same callback
    assert fake.calls["cufftCreate"] == 2
    with pytest.raises(InvalidOptionError, match="epilog keys"):
        F.fft(x, axes=(1,), epilog={"ltoir": code, "extra": 1})
    with pytest.raises(InvalidOptionError, match="epilog must be"):
        F.fft(x, axes=(1,), epilog=42)
    F.plan_cache.clear()


def test_bare_functions_come_from_the_same_table(fake):
    assert cufft.bare("cufftXtExec") is cufft._bare["cufftXtExec"]
    with pytest.raises(CufftError, match="not exported"):
        cufft.bare("cufftNoSuchEntry")


class _Obj:
    freed = 0

    def free(self):
        _Obj.freed += 1


def test_function_form_cache_hands_objects_out_once():
    c = PlanCache(maxsize=2)
    a, b = _Obj(), _Obj()
    c.put("a", a, 10)
    assert len(c) == 1 and c.pop("a") is a and c.hits == 1 and len(c) == 0
    c.put("a", a, 10)
    c.put("b", b, 20)
    assert len(c) == 2
    assert c.pop("b") is b
    assert c.pop("a") is a and c.pop("a") is None and c.misses == 1
    c.put("a", a)
    c.put("b", b)
    before = _Obj.freed
    c.clear()
    assert _Obj.freed == before + 2 and len(c) == 0
