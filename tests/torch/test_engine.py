"""cuweave.torch's planned products on the CPU: the plan cache (exact keys, LRU bound, no
capture query on the hot path), the autotuning choice and fp8 options, with a recording
``Matmul`` and tensors posing as CUDA ones (only what the engine reads: shape, strides, dtype,
pointer, device)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from cuweave import InvalidStateError  # noqa: E402
from cuweave.torch import _engine, clear_plans, plan_count  # noqa: E402


class CudaLike:
    """What the engine reads of a CUDA tensor."""

    def __init__(self, shape, dtype=torch.bfloat16, ptr=1 << 20):
        self.shape, self.dtype, self._ptr = torch.Size(shape), dtype, ptr
        self.device = types.SimpleNamespace(type="cuda", index=0)
        self.is_cuda = True

    def get_device(self):
        return self.device.index

    def stride(self):
        return (self.shape[1], 1) if len(self.shape) == 2 else (1,)

    def data_ptr(self):
        return self._ptr


class RecordingMatmul:
    made: list = []

    def __init__(self, a, b, quantization_scales=None, options=None):
        self.ops, self.scales, self.options = (a, b), quantization_scales, options
        self.calls, self.freed = [], False
        RecordingMatmul.made.append(self)

    def plan(self, epilog=None, epilog_inputs=None, preferences=None):
        self.calls.append(("plan", epilog, preferences))

    def autotune(self, iterations):
        self.calls.append(("autotune", iterations))

    def reset_operands_unchecked(self, a, b, epilog_inputs=None, quantization_scales=None):
        self.ops, self.scales = (a, b), quantization_scales
        self.calls.append(("reset",))

    def execute(self):
        self.calls.append(("execute",))
        return "result"

    def free(self):
        self.freed = True


@pytest.fixture
def engine(monkeypatch):
    RecordingMatmul.made = []
    clear_plans()
    capturing, asked, stream = [False], [0], [7]

    def is_capturing():
        asked[0] += 1
        return capturing[0]

    monkeypatch.setattr(_engine, "Matmul", RecordingMatmul)
    monkeypatch.setattr(_engine, "_current_stream", lambda device: stream[0])
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", is_capturing)
    yield types.SimpleNamespace(made=RecordingMatmul.made, capturing=capturing, asked=asked,
                                stream=stream)
    clear_plans()


def test_a_product_is_planned_once_and_rebound_after(engine):
    a, b = CudaLike((64, 32)), CudaLike((32, 16))
    for _ in range(3):
        assert _engine.run(a, b, "relu") == "result"
    assert len(engine.made) == 1 and plan_count() == 1
    kinds = [c[0] for c in engine.made[0].calls]
    assert kinds == ["plan", "execute", "reset", "execute", "reset", "execute"]
    _engine.run(CudaLike((64, 32), ptr=(1 << 20) + 2), b, "relu")  # another alignment
    assert len(engine.made) == 2 and plan_count() == 2
    clear_plans()
    assert plan_count() == 0 and all(mm.freed for mm in engine.made)


def test_the_cache_is_bounded_by_count(engine):
    b = CudaLike((32, 16))
    for rows in range(2, 2 + _engine._MAX_PLANS + 3):
        _engine.run(CudaLike((rows, 32)), b, "default")
    assert plan_count() == _engine._MAX_PLANS
    assert [i for i, mm in enumerate(engine.made) if mm.freed] == [0, 1, 2]


def test_the_least_recently_used_plan_is_evicted(engine, monkeypatch):
    monkeypatch.setattr(_engine._plans, "maxsize", 3)
    b = CudaLike((32, 16))
    a = [CudaLike((rows, 32)) for rows in (2, 3, 4, 5)]
    for i in (0, 1, 2, 0):  # plan 1 is now the least recently used
        _engine.run(a[i], b, "default")
    _engine.run(a[3], b, "default")
    assert [mm.freed for mm in engine.made] == [False, True, False, False]
    assert plan_count() == 3


def test_keys_are_exact(engine):
    b = CudaLike((32, 16))
    base = 1 << 20
    _engine.run(CudaLike((64, 32), ptr=base + 2), b, "default")
    _engine.run(CudaLike((64, 32), ptr=base + 6), b, "default")  # also 2-byte aligned
    assert len(engine.made) == 1
    for other in (CudaLike((64, 32), ptr=base + 4), CudaLike((64, 32), ptr=base),
                  CudaLike((64, 32), ptr=base + 256 * 3),  # 256-aligned as base: same plan
                  CudaLike((64, 32), dtype=torch.float16), CudaLike((32, 64))):
        _engine.run(other, b, "default")
    assert len(engine.made) == 5
    _engine.run(CudaLike((64, 32)), b, "bias", {"bias": CudaLike((1, 16))})
    _engine.run(CudaLike((64, 32)), b, "bias", {"bias": CudaLike((1, 16), ptr=base + 8)})
    assert len(engine.made) == 7 and plan_count() == 7
    a = CudaLike((64, 32))
    assert _engine._key("x", None, 0, a, b, None) != _engine._key("x", None, 1, a, b, None)


def test_a_run_on_its_last_stream_does_not_ask_about_capture(engine):
    a, b = CudaLike((64, 32)), CudaLike((32, 16))
    _engine.run(a, b, "default")
    assert engine.asked[0] == 1  # the new plan: refused during a capture
    for _ in range(3):
        _engine.run(a, b, "default")
    assert engine.asked[0] == 1
    engine.stream[0] = 9  # another stream, not capturing: run there, remembered
    _engine.run(a, b, "default")
    assert engine.asked[0] == 2
    key = _engine._key("default", None, 0, a, b, None)
    entry = _engine._plans.pop(key)
    assert entry.stream == 9
    _engine._plans.put(key, entry)


def test_an_entry_put_back_beside_an_idle_one_is_kept_too(engine):
    a, b = CudaLike((64, 32)), CudaLike((32, 16))
    _engine.run(a, b, "default")
    key = _engine._key("default", None, 0, a, b, None)
    running = _engine._plans.pop(key)  # another thread's run in flight
    _engine.run(a, b, "default")  # plans a second product
    _engine._plans.put(key, running)
    assert plan_count() == 2 and len(_engine._plans) == 2  # both idle, both found again
    both = [_engine._plans.pop(key), _engine._plans.pop(key)]
    assert running in both and _engine._plans.pop(key) is None
    for entry in both:
        _engine._plans.put(key, entry)
    clear_plans()
    assert plan_count() == 0 and all(mm.freed for mm in engine.made)


def test_errors_give_the_entry_back(engine, monkeypatch):
    a, b = CudaLike((64, 32)), CudaLike((32, 16))
    _engine.run(a, b, "default")
    mm = engine.made[0]
    monkeypatch.setattr(mm, "execute", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _engine.run(a, b, "default")
    assert plan_count() == 1 and len(_engine._plans) == 1 and not mm.freed


def test_large_products_are_autotuned_over_more_candidates(engine):
    _engine.run(CudaLike((64, 32)), CudaLike((32, 16)), "default")
    small = engine.made[-1].calls
    assert small[0] == ("plan", "default", None) and ("autotune", 3) not in small
    n = 2048  # 2 n^3 = 2^34 flops
    _engine.run(CudaLike((n, n)), CudaLike((n, n)), "gelu_aux_bias")
    big = engine.made[-1].calls
    assert big[0][2].limit == _engine.AUTOTUNE_CANDIDATES
    assert big[1] == ("autotune", _engine.AUTOTUNE_ITERATIONS)


def test_fp8_products_carry_scales_and_the_result_type(engine):
    a = CudaLike((64, 32), dtype=torch.float8_e4m3fn)
    b = CudaLike((32, 16), dtype=torch.float8_e4m3fn)
    scales = {"a": "sa", "b": "sb"}
    _engine.run(a, b, "bias", scales=scales, out_dtype=torch.bfloat16)
    mm = engine.made[-1]
    assert mm.scales == scales and mm.options.result_type == "bfloat16"
    _engine.run(a, b, "bias", scales={"a": "sa2", "b": "sb2"}, out_dtype=torch.bfloat16)
    assert len(engine.made) == 1 and mm.scales == {"a": "sa2", "b": "sb2"}
    _engine.run(a, b, "bias", scales=scales, out_dtype=torch.float16)  # another plan
    assert len(engine.made) == 2 and engine.made[-1].options.result_type == "float16"


def test_a_new_problem_during_capture_is_refused(engine):
    a, b = CudaLike((64, 32)), CudaLike((32, 16))
    _engine.run(a, b, "default")
    engine.capturing[0] = True
    assert _engine.run(a, b, "default") == "result"  # planned before: replayable
    with pytest.raises(InvalidStateError, match="warm-up"):
        _engine.run(CudaLike((48, 32)), b, "default")
    assert len(engine.made) == 1 and plan_count() == 1
