"""cuweave.torch's planned products on the CPU: the plan cache (the project's PlanCache), the
autotuning choice and fp8 options, with a recording ``Matmul`` and tensors posing as CUDA
ones (only what the engine reads: shape, strides, dtype, pointer, device)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from cuweave import InvalidStateError  # noqa: E402
from cuweave._internal.cache import PlanCache  # noqa: E402
from cuweave.torch import _engine, clear_plans, plan_count  # noqa: E402


class CudaLike:
    """What the engine reads of a CUDA tensor."""

    def __init__(self, shape, dtype=torch.bfloat16, ptr=1 << 20):
        self.shape, self.dtype, self._ptr = torch.Size(shape), dtype, ptr
        self.device = types.SimpleNamespace(type="cuda", index=0)

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
    capturing = [False]
    monkeypatch.setattr(_engine, "Matmul", RecordingMatmul)
    monkeypatch.setattr(_engine, "_current_stream", lambda device: 7)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    yield types.SimpleNamespace(made=RecordingMatmul.made, capturing=capturing)
    clear_plans()


def test_the_layers_keep_plans_in_the_project_plan_cache():
    assert isinstance(_engine._plans, PlanCache)


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
    assert plan_count() == _engine._MAX_PLANS + 1  # the LRU plus PlanCache's front slot
    assert sum(mm.freed for mm in engine.made) == 2
    assert engine.made[0].freed


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
