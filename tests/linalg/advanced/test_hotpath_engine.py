"""Hot-path behaviour of the cuBLASLt backend, on the CPU with every native call stubbed.

The recording fakes of :mod:`tests.fakes.cublaslt` stand in for cuBLASLt, the CUDA runtime
helpers and torch's CUDA side: these tests check what the engine *calls* (descriptor setters,
cache hits, pointers passed to ``cublasLtMatmul``), not numbers. Timing of the same stubs lives in
``python -m tests.linalg.advanced.test_hotpath_engine`` (prints µs/call; asserts nothing).
"""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest

from cuweave._bindings import cublaslt as lt
from cuweave._internal import pinned, staging
from cuweave._internal.errors import (
    CublasLtError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
    UnsupportedLayoutError,
)
from cuweave.linalg.advanced import Matmul, _cuda, matmul
from cuweave.linalg.advanced._function import plan_cache
from cuweave.linalg.advanced._plan import Plan
from tests.fakes.cublaslt import FakeGPU

# ---- helpers ------------------------------------------------------------------------------------


def _ptr_sets(gpu, attr):
    return [v for _, a, v in gpu.set_calls if a == int(attr)]


_P = lt.PreferenceAttribute

_ALIGN = (_P.MIN_ALIGNMENT_A_BYTES, _P.MIN_ALIGNMENT_B_BYTES, _P.MIN_ALIGNMENT_C_BYTES,
          _P.MIN_ALIGNMENT_D_BYTES)


def _alignment_prefs(gpu):
    """The MIN_ALIGNMENT_{A,B,C,D}_BYTES of the last heuristics query."""
    got = {attr: value for attr, value in gpu.pref_calls if attr in set(map(int, _ALIGN))}
    return tuple(got[int(attr)] for attr in _ALIGN)


# ---- the pointers and scalars each run passes to cuBLASLt ---------------------------------------


def test_planned_execute_passes_current_pointers(gpu):
    a, b = gpu.tensor(64, 32), gpu.tensor(32, 16)
    mm = Matmul(a, b)
    mm.plan()
    d1 = mm.execute()
    a2 = gpu.tensor(64, 32)
    mm.reset_operands(a=a2)
    d2 = mm.execute()
    assert d1.data_ptr() != d2.data_ptr()
    (c1, c2) = gpu.matmul_calls
    # row-major result: lt A is the user's b, lt B the user's a (swap); C and D are the result
    assert (c1[3], c1[5], c1[8], c1[10]) == (b.data_ptr(), a.data_ptr(), d1.data_ptr(),
                                             d1.data_ptr())
    assert (c2[3], c2[5], c2[8], c2[10]) == (b.data_ptr(), a2.data_ptr(), d2.data_ptr(),
                                             d2.data_ptr())
    assert d2.shape == (64, 16)
    mm.free()


def test_c_given_is_passed_as_c_not_d(gpu):
    a, b, c = gpu.tensor(64, 32), gpu.tensor(32, 16), gpu.tensor(64, 16)
    with Matmul(a, b, c, beta=1.0) as mm:
        mm.plan()
        d = mm.execute()
        c2 = gpu.tensor(64, 16)
        mm.reset_operands(c=c2)
        d2 = mm.execute()
    (c1, cc2) = gpu.matmul_calls
    assert (c1[8], c1[10]) == (c.data_ptr(), d.data_ptr()) and c.data_ptr() != d.data_ptr()
    assert (cc2[8], cc2[10]) == (c2.data_ptr(), d2.data_ptr())


def test_alpha_beta_are_written_on_reset_only(gpu):
    a, b, c = gpu.tensor(8, 8), gpu.tensor(8, 8), gpu.tensor(8, 8)
    mm = Matmul(a, b, c, alpha=2.0, beta=0.5)
    mm.plan()
    mm.execute()
    eng = mm._plan.engine
    assert (eng.alpha_buf[0], eng.beta_buf[0]) == (2.0, 0.5)
    mm.reset_operands(alpha=3.0)
    mm.execute()
    assert (eng.alpha_buf[0], eng.beta_buf[0]) == (3.0, 0.5)
    mm.alpha = 4.0  # the public attribute stays authoritative
    mm.execute()
    assert eng.alpha_buf[0] == 4.0
    mm.free()


def test_same_bias_pointer_is_not_rebound(gpu):
    a, b, bias = gpu.tensor(64, 32), gpu.tensor(32, 48), gpu.tensor(64)
    mm = Matmul(a, b)
    mm.plan(epilog="RELU_BIAS", epilog_inputs={"bias": bias})
    gpu.set_calls.clear()
    for _ in range(3):
        mm.execute()
    assert _ptr_sets(gpu, lt.MatmulDescAttribute.BIAS_POINTER) == []
    bias2 = gpu.tensor(64)
    mm.reset_operands(epilog_inputs={"bias": bias2})
    mm.execute()
    mm.execute()
    assert _ptr_sets(gpu, lt.MatmulDescAttribute.BIAS_POINTER) == [bias2.data_ptr()]
    mm.free()


def test_aux_output_pointer_follows_each_result(gpu):
    a, b = gpu.tensor(64, 32, order="F"), gpu.tensor(32, 48, order="F")
    mm = Matmul(a, b)
    mm.plan(epilog="RELU_AUX")
    gpu.set_calls.clear()
    _, aux1 = mm.execute()
    _, aux2 = mm.execute()
    sets = _ptr_sets(gpu, lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER)
    assert sets == [aux1["relu_aux"].data_ptr(), aux2["relu_aux"].data_ptr()]
    mm.free()


def test_inplace_lean_run_writes_into_c(gpu):
    from cuweave.linalg.advanced import MatmulOptions

    a, b, c = gpu.tensor(32, 16), gpu.tensor(16, 24), gpu.tensor(32, 24)
    with Matmul(a, b, c, beta=0.0, options=MatmulOptions(inplace=True)) as mm:
        mm.plan()
        assert mm._ready is not None
        allocations = next(gpu.torch.allocations)
        assert mm.execute() is c
        c2 = gpu.tensor(32, 24)
        mm.reset_operands(c=c2)
        assert mm.execute() is c2
        assert next(gpu.torch.allocations) == allocations + 2  # only the test's c2
        call = gpu.matmul_calls[-1]
        assert (call[8], call[10]) == (c2.data_ptr(), c2.data_ptr())


# ---- the function form's plan cache -------------------------------------------------------------


def test_function_form_hits_the_plan_cache(gpu):
    a, b = gpu.tensor(32, 32), gpu.tensor(32, 32)
    matmul(a, b)
    matmul(gpu.tensor(32, 32), gpu.tensor(32, 32))
    assert (plan_cache.misses, plan_cache.hits) == (1, 1)
    matmul(a, b, options={"sm_count_target": 4})
    matmul(a, b, options={"sm_count_target": 4})
    assert (plan_cache.misses, plan_cache.hits) == (2, 2)
    matmul(a, gpu.tensor(32, 32, order="F"))  # another layout: another plan
    bias = gpu.tensor(32)
    matmul(a, b, epilog="RELU_BIAS", epilog_inputs={"bias": bias})
    matmul(a, b, epilog="RELU_BIAS", epilog_inputs={"bias": gpu.tensor(32)})
    assert (plan_cache.misses, plan_cache.hits) == (4, 3)
    assert len(gpu.matmul_calls) == 7


def test_function_form_keeps_no_tensor_alive_and_rebinds_each_call(gpu):
    import gc
    import weakref

    b = gpu.tensor(32, 32)
    for alpha in (None, 2.0, None):
        a = gpu.tensor(32, 32)
        ref = weakref.ref(a)
        d = matmul(a, b, alpha=alpha)
        call = gpu.matmul_calls[-1]
        assert (call[3], call[5], call[10]) == (b.data_ptr(), a.data_ptr(), d.data_ptr())
        assert plan_cache.misses == 1  # one plan; the later calls take the cached one
        del a
        gc.collect()
        assert ref() is None  # the cached plan's operand records dropped the tensor
    (plan,) = [m for m, _ in plan_cache._idle.values()] + [s[1] for s in plan_cache._front]
    # the cached plan holds no call (no operand), and the last call's alpha is in its buffer
    assert isinstance(plan, Plan) and plan.engine.alpha_buf[0] == 1.0


def test_function_form_rebinds_new_pointers(gpu):
    a, b = gpu.tensor(16, 8), gpu.tensor(8, 24)
    matmul(a, b, epilog="BIAS", epilog_inputs={"bias": gpu.tensor(16)})
    bias = gpu.tensor(16)
    a2 = gpu.tensor(16, 8)
    d = matmul(a2, b, epilog="BIAS", epilog_inputs={"bias": bias})
    last = gpu.matmul_calls[-1]
    # a bias along M needs a column-major result: lt A is the user's a
    assert (last[3], last[5], last[10]) == (a2.data_ptr(), b.data_ptr(), d.data_ptr())
    assert d.stride() == (1, 16)
    assert _ptr_sets(gpu, lt.MatmulDescAttribute.BIAS_POINTER)[-1] == bias.data_ptr()


def test_options_object_mutation_is_a_new_plan(gpu):
    from cuweave.linalg.advanced import MatmulOptions

    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    opts = MatmulOptions(sm_count_target=2)
    matmul(a, b, options=opts)
    opts.sm_count_target = 3
    matmul(a, b, options=opts)
    assert (plan_cache.misses, plan_cache.hits) == (2, 0)


def test_function_form_resets_the_stream_each_call(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    matmul(a, b, stream=0x5000)
    matmul(a, b)  # the cached plan must not keep running on 0x5000
    assert (plan_cache.misses, plan_cache.hits) == (1, 1)
    assert [c[15] for c in gpu.matmul_calls] == [0x5000, 0]
    # ordered on an event recorded when the first call ended (0x5000 may be gone by now)
    assert gpu.waits == [(0x5000, 0), (0, 0x5000)]


def test_function_form_hit_on_a_given_stream(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    matmul(a, b)
    matmul(a, b, stream=0x5000)  # a hit: the cached plan's run on the given stream
    matmul(a, b)
    assert (plan_cache.misses, plan_cache.hits) == (1, 2)
    assert [c[15] for c in gpu.matmul_calls] == [0, 0x5000, 0]
    # ordered on an event recorded when the second call ended (0x5000 may be gone by now)
    assert gpu.waits == [(0x5000, 0), (0, 0x5000)]
    with pytest.raises(InvalidOptionError):  # before any work; the plan goes back
        matmul(a, b, stream=-1)
    matmul(a, b)
    assert (plan_cache.misses, plan_cache.hits, len(gpu.matmul_calls)) == (1, 4, 4)


def test_function_form_plans_again_for_a_less_aligned_operand(gpu):
    b = gpu.tensor(32, 32, dtype="float16")
    matmul(gpu.tensor(32, 32, dtype="float16"), b)
    matmul(gpu.tensor(32, 32, dtype="float16", offset=4), b)
    assert (plan_cache.misses, plan_cache.hits) == (2, 0)
    assert _alignment_prefs(gpu) == (256, 4, 256, 256)
    matmul(gpu.tensor(32, 32, dtype="float16", offset=4), b)
    assert (plan_cache.misses, plan_cache.hits) == (2, 1)


# ---- host operands are staged through the pinned ring -------------------------------------------


@pytest.mark.parametrize("threads", [False, True])
@pytest.mark.parametrize(("sizes", "chunk", "capacity"), [
    ((1, 1000), 256, 1 << 20),  # everything fits: no waiting
    ((5000, 3001, 17), 512, 1024),  # the ring wraps many times inside one upload_many
    ((0, 4096), 4096, 4096),
])
def test_stager_round_trip_through_a_small_ring(gpu, monkeypatch, threads, sizes, chunk,
                                                capacity):
    monkeypatch.setattr(staging, "_THREAD_MIN", 0)
    rng = np.random.default_rng(len(sizes) + chunk)
    srcs = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    devs = [gpu._host_alloc(n) for n in sizes]
    st = staging.Stager(chunk=chunk, capacity=capacity, threads=threads)
    st.upload_many(list(zip(srcs, devs)), 0)
    outs = [np.full(n, 7, np.uint8) for n in sizes]
    for dev, out in zip(devs, outs):
        st.download(dev, out, 0)
    st.close()
    for src, out in zip(srcs, outs):
        assert np.array_equal(src, out)


def test_stager_keeps_memory_order_of_dense_arrays(gpu):
    x = np.asfortranarray(np.arange(24.0).reshape(4, 6))
    dev = gpu._host_alloc(x.nbytes)
    st = staging.Stager(chunk=40, capacity=64)
    st.upload(x, dev, 0)
    out = np.empty((4, 6), order="F")
    st.download(dev, out, 0)
    strided = np.empty((8, 6))[::2]
    st.download(dev, strided, 0)  # a non-dense destination goes through a temporary
    st.close()
    assert np.array_equal(out, x)
    assert np.array_equal(strided, np.frombuffer(x.tobytes(order="F")).reshape(4, 6))


@pytest.mark.parametrize("epilog", [None, "RELU_AUX_BIAS"])
def test_host_operands_are_uploaded_and_results_downloaded(gpu, monkeypatch, epilog):
    monkeypatch.setattr(staging, "_THREAD_MIN", 0)
    monkeypatch.setattr(staging, "_SHARED", [staging.Stager(chunk=1000, capacity=4096)])
    m, k, n = 40, 24, 56
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(m, dtype=np.float32) if epilog else None
    seen = {}
    pattern = np.arange(m * n, dtype=np.float32)

    def kernel(args):  # snapshot what the device holds; write a recognizable result
        x, y = (b, a) if mm._plan.problem.swap else (a, b)
        seen["a"] = ctypes.string_at(args[3], x.nbytes)
        seen["b"] = ctypes.string_at(args[5], y.nbytes)
        ctypes.memmove(args[10], pattern.ctypes.data, pattern.nbytes)

    gpu.on_matmul = kernel
    mm = Matmul(a, b)
    kw = {"epilog": epilog, "epilog_inputs": {"bias": bias}} if epilog else {}
    mm.plan(**kw)
    for _ in range(2):
        out = mm.execute()
        d, aux = out if epilog else (out, None)
        swap = mm._plan.problem.swap
        assert seen["a"] == (b if swap else a).tobytes()
        assert seen["b"] == (a if swap else b).tobytes()
        flat = d.reshape(-1, order="C" if swap else "F")
        assert np.array_equal(flat, pattern)
        if epilog:
            assert set(aux) == {"relu_aux"}
    mm.free()


def test_repeated_host_results_land_in_pooled_pinned_blocks(gpu):
    """From the second run of a size on, a NumPy result of a GPU run is a page-locked block of
    the pool (the download is one DMA into it); a dropped result's block serves the next."""
    m, k, n = 512, 64, 1024  # a 2 MiB float32 result
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    want = np.arange(m * n, dtype=np.float32)
    gpu.on_matmul = lambda args: ctypes.memmove(args[10], want.ctypes.data, want.nbytes)
    mm = Matmul(a, b)
    mm.plan()
    first = mm.execute()  # the size is new: an ordinary array
    assert not pinned.owns(first.ctypes.data, first.nbytes)
    second = mm.execute()
    assert pinned.owns(second.ctypes.data, second.nbytes)
    assert second.flags.c_contiguous and second.flags.writeable and second.shape == (m, n)
    assert np.array_equal(first, second) and np.array_equal(second.ravel(), want)
    addr = second.ctypes.data
    del second
    third = matmul(a, b)  # the function form too; the block came back to the pool
    assert third.ctypes.data == addr and np.array_equal(third.ravel(), want)
    mm.free()


def test_host_operands_uploaded_again_are_dma_ed_from_where_they_are(gpu):
    """The third upload of a NumPy operand registers its buffer (page-locked in place); from
    then on the run DMAs it directly, and the device still sees exactly its bytes."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1024, 512), dtype=np.float32)  # 2 MiB each
    b = rng.standard_normal((512, 1024), dtype=np.float32)
    seen = {}
    gpu.on_matmul = lambda args: seen.update(a=ctypes.string_at(args[3], 2 << 20),
                                             b=ctypes.string_at(args[5], 2 << 20))
    mm = Matmul(a, b)
    mm.plan()
    for run in range(4):
        queued = len(gpu._queue)
        mm.execute()
        sources = {src for _dst, src, _n in gpu._queue[queued:]}
        direct = {a.ctypes.data, b.ctypes.data} <= sources
        assert direct == (run >= 2), run  # registered by the third upload
        assert seen["a"] == (b if mm._plan.problem.swap else a).tobytes()
        assert seen["b"] == (a if mm._plan.problem.swap else b).tobytes()
    assert sorted(gpu.registered) == sorted([(a.ctypes.data, a.nbytes),
                                             (b.ctypes.data, b.nbytes)])
    a[0, 0] = 42.0  # changed in place: the next run reads the new value
    mm.execute()
    assert np.frombuffer(seen["b" if mm._plan.problem.swap else "a"], np.float32)[0] == 42.0
    mm.free()
    del a, b, mm
    gc.collect()
    assert gpu.registered == []  # unregistered when the arrays went


def test_a_failing_run_waits_for_its_direct_uploads_before_raising(monkeypatch):
    """A run on registered host operands whose cublasLtMatmul fails raises only after its
    stream is done: no DMA from the user's arrays is left queued behind the error (they may
    be changed or freed right after it), and its autotune too."""
    state = {"fail": False}

    def native(*args):
        if state["fail"]:
            return 13  # CUBLAS_STATUS_EXECUTION_FAILED: nothing read, nothing waited for
        g._run_until(len(g._queue))
        return 0

    g = FakeGPU(native_fn=native).install(monkeypatch)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 512), dtype=np.float32)  # 2 MiB
    b = rng.standard_normal((512, 1024), dtype=np.float32)
    mm = Matmul(a, b)
    mm.plan()
    for _ in range(3):
        mm.execute()  # the third registers a and b
    assert len(g.registered) == 2
    state["fail"] = True

    def failing_tune(self, bind, *args):  # the bound run's uploads queued, then a failure
        bind()
        raise CublasLtError(13, "cublasLtMatmul")

    monkeypatch.setattr(_cuda.CudaEngine, "autotune", failing_tune)
    for attempt in (mm.execute, mm.autotune):
        start = len(g._queue)
        with pytest.raises(CublasLtError):
            attempt()
        queued = {src for _d, src, _n in g._queue[start:]}
        assert {a.ctypes.data, b.ctypes.data} <= queued and g._done == len(g._queue)
    mm.free()


def test_a_loop_over_new_operands_registers_none_of_them(gpu):
    w = np.ones((512, 64), np.float32)
    rng = np.random.default_rng(0)
    for _ in range(9):  # each a uploaded once (new arrays reuse the dead ones' id and address)
        a = rng.standard_normal((1024, 512), dtype=np.float32)
        matmul(a, w)
        del a
    assert gpu.registered == []


def test_uploads_leave_unregistered_arrays_resizable(gpu):
    a = np.ones((1024, 512), np.float32)
    b = np.ones((512, 8), np.float32)
    mm = Matmul(a, b)
    mm.plan()
    mm.execute()
    mm.free()
    del mm
    gc.collect()
    a.resize((2048, 512), refcheck=False)  # counted, not registered: no weak reference
    assert a.shape == (2048, 512)


# ---- pointer alignment, algorithms and the epilog table -----------------------------------------


def test_heuristics_get_the_operands_alignment(gpu):
    a = gpu.tensor(64, 32, dtype="float16", offset=16)  # 16-byte aligned view
    b = gpu.tensor(32, 48, dtype="float16")
    mm = Matmul(a, b)
    mm.plan()
    assert mm._plan.problem.swap  # row-major result: lt A is the user's b, lt B the user's a
    assert _alignment_prefs(gpu) == (256, 16, 256, 256)
    mm.reset_operands(a=gpu.tensor(64, 32, dtype="float16", offset=32))  # more aligned: fine
    with pytest.raises(InvalidOperandError, match=r"^a must be at least as aligned.*16 bytes"):
        mm.reset_operands(a=gpu.tensor(64, 32, dtype="float16", offset=2))
    with pytest.raises(InvalidOperandError, match=r"^b must be at least as aligned"):
        mm.reset_operands(b=gpu.tensor(32, 48, dtype="float16", offset=128))
    mm.free()


def test_inplace_result_alignment_is_the_c_pointer(gpu):
    from cuweave.linalg.advanced import MatmulOptions

    a, b = gpu.tensor(32, 32, order="F"), gpu.tensor(32, 32, order="F")
    c = gpu.tensor(32, 32, order="F", offset=8)
    mm = Matmul(a, b, c, beta=1.0, options=MatmulOptions(inplace=True))
    mm.plan()
    assert _alignment_prefs(gpu) == (256, 256, 8, 8)
    mm.free()


def test_bad_algorithm_and_stream_arguments(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    with pytest.raises(InvalidOptionError, match="^algorithm must be"):
        matmul(a, b, algorithm=3)
    mm = Matmul(a, b)
    mm.plan()
    with pytest.raises(InvalidOptionError, match="^algorithm must be"):
        mm.execute(algorithm="garbage")
    with pytest.raises(InvalidOptionError, match="^algorithms"):
        mm.plan(algorithms=[3])
    with pytest.raises(InvalidOptionError, match="^stream must be"):
        mm.execute(stream="s")
    mm.free()


def test_bgrad_layout_requirement_comes_from_the_table(gpu, monkeypatch):
    """Without a package that can copy on the device, the restriction is a typed error."""
    from cuweave._internal import packages

    monkeypatch.setattr(packages.TorchAdapter, "dense_copy", packages.Adapter.dense_copy)
    a, b = gpu.tensor(32, 16), gpu.tensor(16, 24)  # row-major a
    mm = Matmul(a, b)
    with pytest.raises(UnsupportedLayoutError, match="^a must be column-major for epilog BGRADA"):
        mm.plan(epilog="BGRADA")
    mm.free()
    mm = Matmul(gpu.tensor(32, 16, order="F"), gpu.tensor(16, 24, order="F"))
    with pytest.raises(UnsupportedLayoutError, match="^b must be row-major for epilog BGRADB"):
        mm.plan(epilog="BGRADB")
    mm.free()


def _recording_copies(gpu, monkeypatch):
    """TorchAdapter.dense_copy replaced by one returning fresh fake tensors of the asked layout;
    returns the list of (source pointer, shape, order, copy) calls."""
    from cuweave._internal import packages

    calls = []

    def dense_copy(self, obj, shape, order, stream, device_id):
        copy = gpu.tensor(*shape[:-2], *shape[-2:], order=order) if order == "C" or \
            len(shape) == 2 else None
        if copy is None:  # batched F order: batch outermost, column-major matrices
            copy = gpu.tensor(*shape[:-2], shape[-1], shape[-2]).permute(
                tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2))
        calls.append((obj.data_ptr(), tuple(shape), order, copy))
        return copy

    monkeypatch.setattr(packages.TorchAdapter, "dense_copy", dense_copy)
    return calls


def test_bgrad_device_operand_is_copied_into_the_order_cublaslt_needs(gpu, monkeypatch):
    from cuweave.linalg.advanced._epilogs import lt_epilog
    from cuweave.linalg.advanced._layout import lt_layout_ok

    calls = _recording_copies(gpu, monkeypatch)
    a, b = gpu.tensor(32, 16), gpu.tensor(16, 24)  # row-major a: BGRADA needs it column-major
    mm = Matmul(a, b)
    mm.plan(epilog="BGRADA")
    assert mm._plan.fit.dev_copies == {"a": ((32, 16), "F")}
    p = mm._plan.problem
    assert lt_layout_ok(lt_epilog(mm._plan.epilog, p.swap), p)
    for _ in range(2):  # a copy per run, its pointer passed as lt A
        mm.execute()
    assert [(src, shape, order) for src, shape, order, _ in calls] == \
        [(a.data_ptr(), (32, 16), "F")] * 2
    lt_a = 3 if not p.swap else 5
    assert [call[lt_a] for call in gpu.matmul_calls] == [c[3].data_ptr() for c in calls]
    mm.free()


def test_device_batch_broadcasting_outside_the_frame_is_copied(gpu, monkeypatch):
    calls = _recording_copies(gpu, monkeypatch)
    a = gpu.tensor(2, 1, 8, 4)  # a (2, 1) batch broadcast to (2, 3) has no single stride
    b = gpu.tensor(3, 4, 5)
    mm = Matmul(a, b)
    mm.plan()
    assert set(mm._plan.fit.dev_copies) <= {"a", "b"} and mm._plan.fit.dev_copies
    mm.execute()
    assert [shape for _, shape, _, _ in calls] == [mm._plan.fit.dev_copies[k][0]
                                                   for k in mm._plan.fit.dev_copies]
    assert all(shape[:-2] == (2, 3) for _, shape, _, _ in calls)
    mm.free()


def test_autotune_cache_key_and_stale_entry_fallback(gpu, monkeypatch, tmp_path, caplog):
    from cuweave.linalg.advanced import _autotune_cache
    from cuweave.linalg.advanced._algorithm import Algorithm

    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    keys = []
    for opts in ({}, {"sm_count_target": 8}):
        mm = Matmul(a, b, options=opts)
        mm.plan()
        keys.append(mm._plan.cache_key())
        mm.options.fast_accumulation = True  # (fp8 only: set on the planned object here)
        keys.append(mm._plan.cache_key())
        mm.free()
    assert len(set(keys)) == 4

    def reject(*args):
        raise CublasLtError(15, "cublasLtMatmulAlgoCheck")

    monkeypatch.setattr(_autotune_cache, "_state", {"path": str(tmp_path / "c.json")})
    monkeypatch.setattr(_autotune_cache, "lookup", lambda dev, key: [Algorithm(b"x" * 64, 1)])
    monkeypatch.setattr(lt, "algo_check", reject)
    mm = Matmul(a, b)
    with caplog.at_level("INFO"):
        algos = mm.plan()
    assert len(algos) == 1 and algos[0].workspace_size == 1024  # the heuristics' answer
    assert "rejected" in caplog.text
    mm.free()


def test_autotune_of_a_plan_from_the_autotune_cache_times_nothing(gpu, monkeypatch, tmp_path):
    """A second process planning from the persistent cache pays no tuning: autotune() keeps the
    stored order (pruned when asked) instead of timing every algorithm again."""
    from cuweave.linalg.advanced import _autotune_cache, _cuda
    from cuweave.linalg.advanced._algorithm import Algorithm

    stored = [Algorithm(b"x" * 64, 1), Algorithm(b"y" * 64, 1)]
    monkeypatch.setattr(_autotune_cache, "_state", {"path": str(tmp_path / "c.json")})
    monkeypatch.setattr(_autotune_cache, "lookup", lambda dev, key: list(stored))
    monkeypatch.setattr(_autotune_cache, "store", lambda dev, key, algos: None)
    monkeypatch.setattr(lt, "algo_check", lambda *a: lt.HeuristicResult())
    timed = []
    monkeypatch.setattr(_cuda.CudaEngine, "autotune", lambda self, *a: timed.append(a) or [])
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    planned = mm.plan()
    assert len(planned) == 2
    assert len(mm.autotune(prune=1)) == 1 and timed == []
    mm.free()
    monkeypatch.setattr(_autotune_cache, "lookup", lambda dev, key: None)  # a cache miss
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    mm.plan()
    mm.autotune()
    assert len(timed) == 1  # timed as before
    mm.free()


# ---- streams, devices and lifetimes -------------------------------------------------------------


def test_release_operands_drops_stream_and_epilog_inputs(gpu):
    a, b, bias = gpu.tensor(16, 8), gpu.tensor(8, 24), gpu.tensor(16)
    mm = Matmul(a, b, stream=0x7000)
    mm.plan(epilog="BIAS", epilog_inputs={"bias": bias})
    mm.execute()
    mm.release_operands()
    assert mm._stream is None and mm._call is None
    with pytest.raises(InvalidStateError, match="epilog_inputs"):
        mm.reset_operands(a, b)
    mm.reset_operands(a, b, epilog_inputs={"bias": gpu.tensor(16)})
    mm.execute()
    assert [c[15] for c in gpu.matmul_calls] == [0x7000, 0]
    mm.free()


def test_stream_change_orders_the_new_stream_after_the_old(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    mm = Matmul(a, b)
    mm.plan()
    mm.execute()  # the current stream (0): where the workspace was allocated, no wait
    mm.execute(stream=0x5000)
    mm.execute(stream=0x5000)  # same stream: nothing to order
    mm.execute(stream=0x6000)
    assert gpu.waits == [(0x5000, 0), (0x6000, 0x5000)]
    assert gpu.syncs == []
    mm.execute(stream=0x6000, release_workspace=True)
    assert gpu.syncs == [0x6000]  # the workspace is dropped only after its last use
    mm.free()


def test_engine_free_waits_for_the_last_stream(gpu):
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    mm.plan()
    mm.execute(stream=0x5000)
    mm.free()  # the stream may be destroyed by now: the whole device is waited for
    assert gpu.syncs == ["device"]
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    mm.plan()
    mm.execute(stream=0x5000)
    mm.release_operands()  # an event now stands for the stream's work
    gpu.syncs.clear()
    mm.free()
    assert gpu.syncs == []  # waited on that event (the fake event runs the queue)
    mm = Matmul(gpu.tensor(16, 16), gpu.tensor(16, 16))
    mm.plan()
    mm.execute()
    mm.free()
    # allocated and last used on stream 0 from a stream-ordered pool: the free itself is
    # ordered, nothing to wait for (the one rule matmul and FFT share, _internal/resources.py)
    assert gpu.syncs == []


def test_plan_device_is_made_current_with_several_devices(gpu):
    a, b = gpu.tensor(16, 16), gpu.tensor(16, 16)
    mm = Matmul(a, b)
    mm.plan()
    gpu.set_devices.clear()
    mm.execute()
    assert gpu.set_devices == []  # one device: nothing to do per call
    mm.free()
    gpu.devices = 2
    mm = Matmul(a, b)
    mm.plan()
    gpu.set_devices.clear()
    mm.execute()
    mm.execute()
    assert gpu.set_devices == [0, 0]
    mm.free()


def test_dropping_a_planned_matmul_frees_it_without_gc(gpu, monkeypatch):
    import gc
    import weakref

    freed = []
    monkeypatch.setattr(_cuda.CudaEngine, "free", lambda self: freed.append(self))
    a, b, bias = gpu.tensor(64, 32), gpu.tensor(32, 48), gpu.tensor(64)
    gc.disable()
    try:
        for kw in ({}, {"epilog": "RELU_BIAS", "epilog_inputs": {"bias": bias}}):
            mm = Matmul(a, b)
            mm.plan(**kw)
            mm.execute()
            ref = weakref.ref(mm)
            del mm
            assert ref() is None  # no reference cycle keeps a plan (and its workspace) alive
        assert len(freed) == 2
    finally:
        gc.enable()


# ---- when execute() takes the lean run unchecked ------------------------------------------------


def test_lean_run_applies_only_while_it_is_valid(gpu):
    a, b = gpu.tensor(64, 32), gpu.tensor(32, 16)
    mm = Matmul(a, b)
    assert mm._ready is None  # not planned: execute() raises through the general path
    with pytest.raises(InvalidStateError):
        mm.execute()
    mm.plan()
    assert mm._ready is not None
    mm.release_operands()
    assert mm._ready is None
    with pytest.raises(InvalidStateError):
        mm.execute()
    a2 = gpu.tensor(64, 32)
    mm.reset_operands(a2, b)
    assert mm._ready is not None
    mm.execute()
    assert gpu.matmul_calls[-1][5] == a2.data_ptr()  # lt B is the user's a (row-major swap)
    mm.reset_operands(stream=0x7000)  # a fixed stream: the call carries it
    assert mm._ready is not None
    mm.execute()
    assert gpu.matmul_calls[-1][-1] == 0x7000
    mm.free()
    assert mm._ready is None
    with pytest.raises(InvalidStateError):
        mm.execute()


def test_lean_run_is_not_built_for_aux_outputs_or_fixed_streams(gpu):
    a, b = gpu.tensor(64, 32), gpu.tensor(32, 48)
    with Matmul(a, b) as mm:
        mm.plan(epilog="RELU_AUX")
        assert not mm._plan.lean
        _, aux = mm.execute()
        assert "relu_aux" in aux
    with Matmul(a, b, stream=0x7000) as mm:
        mm.plan()
        assert mm._plan.lean and mm._call.stream == 0x7000
        mm.execute()
        assert gpu.matmul_calls[-1][-1] == 0x7000


def _two_algorithms(monkeypatch, sizes=(1024, 4096)):
    def heuristic(*a, **k):
        out = []
        for i, ws in enumerate(sizes):
            r = lt.HeuristicResult()
            r.workspaceSize = ws
            r.algo.data[0] = i + 1
            out.append(r)
        return out

    monkeypatch.setattr(lt, "algo_get_heuristic", heuristic)


def test_run_patches_one_set_of_argument_objects(gpu, monkeypatch):
    _two_algorithms(monkeypatch)
    a, b = gpu.tensor(32, 16), gpu.tensor(16, 8)
    mm = Matmul(a, b)
    first, second = mm.plan()
    eng = mm._plan.engine
    slots = [eng.args[i] for i in (3, 5, 8, 10, 13, 14, 15)]
    mm.execute()
    assert gpu.matmul_calls[-1][12]._obj is first.algo  # by reference, not a copy
    mm.execute(algorithm=second)  # its own reference; the workspace grown for it
    call = gpu.matmul_calls[-1]
    assert call[12]._obj is second.algo and call[14] == 4096
    mm.execute()
    assert gpu.matmul_calls[-1][12]._obj is first.algo
    eng._build_args(second)  # as autotune does: the same objects, the new algorithm
    assert [eng.args[i] for i in (3, 5, 8, 10, 13, 14, 15)] == slots
    assert all(x is y for x, y in zip([eng.args[i] for i in (3, 5, 8, 10, 13, 14, 15)], slots))
    mm.execute()
    assert gpu.matmul_calls[-1][12]._obj is second.algo
    mm.execute(release_workspace=True)
    assert eng.has_workspace is False
    mm.execute()  # the workspace comes back, into the same argument objects
    call = gpu.matmul_calls[-1]
    assert eng.has_workspace and call[13] == eng.workspace_ptr and call[14] == 4096
    d = mm.execute()
    assert gpu.matmul_calls[-1][10] == d.data_ptr() == gpu.matmul_calls[-1][8]
    mm.free()


@pytest.mark.parametrize("order", ["C", "F"])
def test_results_on_the_current_stream_come_from_the_result_maker(gpu, monkeypatch, order):
    from cuweave._internal import packages

    made = []
    real = packages.TORCH.result_maker

    def maker(*args):
        new, pointer = real(*args)
        return (lambda: made.append(new()) or made[-1]), pointer

    monkeypatch.setattr(packages.TORCH, "result_maker", maker)
    switched = []  # (stream, whether the maker ran while it was made current)
    real_on_stream = packages.TORCH.on_stream

    def on_stream(stream, device_id, fn, *args, **kwargs):
        n = len(made)
        out = real_on_stream(stream, device_id, fn, *args, **kwargs)
        switched.append((stream, len(made) > n))
        return out

    monkeypatch.setattr(packages.TORCH, "on_stream", on_stream)
    a, b = gpu.tensor(32, 16, order=order), gpu.tensor(16, 8, order=order)
    mm = Matmul(a, b)
    mm.plan()
    d1 = mm.execute()
    assert made == [d1] and gpu.matmul_calls[-1][10] == d1.data_ptr() and switched == []
    d2 = mm.execute(stream=0x5000)  # another stream: the maker, with that stream current
    assert made == [d1, d2] and gpu.matmul_calls[-1][10] == d2.data_ptr()
    assert switched == [(0x5000, True)]
    assert (d1.shape, d1.stride()) == (d2.shape, d2.stride())
    mm.free()
    del made[1:]
    monkeypatch.setattr(packages.TORCH, "result_maker", lambda *args: None)
    mm = Matmul(a, b)  # a package without a maker: the allocator on every stream
    mm.plan()
    d3 = mm.execute()
    assert made == [d1] and (d3.shape, d3.stride()) == (d1.shape, d1.stride())
    assert gpu.matmul_calls[-1][10] == d3.data_ptr()
    mm.free()


def test_function_form_key_follows_alignment_and_type_pairs(gpu):
    a, b = gpu.tensor(32, 32), gpu.tensor(32, 32)
    matmul(a, b)
    matmul(gpu.tensor(32, 32, offset=512), gpu.tensor(32, 32, offset=256))  # still 256
    assert (plan_cache.misses, plan_cache.hits) == (1, 1)
    matmul(gpu.tensor(32, 32, offset=16), b)  # 16-byte aligned: another plan
    a16 = gpu.tensor(32, 32, offset=48)  # 16 again
    matmul(a16, b)
    assert (plan_cache.misses, plan_cache.hits) == (2, 2)
    assert gpu.matmul_calls[-1][5] == a16.data_ptr()  # lt B: the user's a (row-major result)


# ---- profiling (not a test) ---------------------------------------------------------------------


def _profile(calls: int = 20000) -> None:  # pragma: no cover - manual tool
    import cProfile
    import pstats
    import timeit

    lib = ctypes.CDLL(None)
    noop = lib["labs"]  # ignores the extra arguments (caller-cleaned C ABI)
    noop.restype = ctypes.c_int
    mp = pytest.MonkeyPatch()
    gpu = FakeGPU(native_fn=noop).install(mp)
    mp.setattr(lt, "create", lambda: 0)  # labs(handle) is the status: 0
    try:
        a, b, bias = gpu.tensor(64, 64), gpu.tensor(64, 64), gpu.tensor(64)
        mm = Matmul(a, b)
        mm.plan()
        mb = Matmul(a, b)
        mb.plan(epilog="RELU_BIAS", epilog_inputs={"bias": bias})
        mx = Matmul(a, b)
        mx.plan(epilog="RELU_AUX_BIAS", epilog_inputs={"bias": bias})
        declared = lib["labs"]  # the benchmark's floor: declared argtypes, Python ints
        declared.restype = ctypes.c_int
        declared.argtypes = [ctypes.c_void_p] * 14 + [ctypes.c_size_t, ctypes.c_void_p]
        floor_args = (0, *range(1, 12), ctypes.byref(lt.MatmulAlgo()), 13, 14, 0)
        cases = {
            "raw ctypes floor": lambda: declared(*floor_args),
            "execute": mm.execute,
            "execute RELU_BIAS": mb.execute,
            "execute RELU_AUX_BIAS": mx.execute,
            "reset_operands_unchecked(a, b)": lambda: mm.reset_operands_unchecked(a, b),
            "matmul(a, b)": lambda: matmul(a, b),
            "matmul(a, b, RELU_BIAS)": lambda: matmul(a, b, epilog="RELU_BIAS",
                                                      epilog_inputs={"bias": bias}),
        }
        for name, fn in cases.items():
            best = min(timeit.repeat(fn, number=calls, repeat=5)) / calls
            print(f"{name:34s} {best * 1e6:7.2f} us/call")
        if "-v" in sys.argv:
            for name in ("execute RELU_BIAS", "matmul(a, b)"):
                prof = cProfile.Profile()
                prof.runcall(lambda fn=cases[name]: [fn() for _ in range(calls)])
                pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    finally:
        for m in (mm, mb, mx):
            m.free()
        plan_cache.clear()
        mp.undo()


if __name__ == "__main__":  # pragma: no cover
    _profile()


def test_pointer_setter_writes_the_descriptor_through_the_library():
    """The run's pointer setter calls the untyped ``cublasLtMatmulDescSetAttribute`` on its
    pre-built arguments (a host-side descriptor: no GPU needed, only the library); stubs of
    the typed setter are called instead."""
    try:
        lt.lib()
    except Exception as exc:  # no cuBLASLt here
        pytest.skip(f"cuBLASLt does not load: {exc}")
    from cuweave._bindings.library_types import ComputeType, CudaDataType

    desc = lt.matmul_desc_create(ComputeType.COMPUTE_32F, CudaDataType.CUDA_R_32F)
    try:
        set_ = _cuda._pointer_setter(desc)
        for attr, ptr in ((lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER, 0x7F0000001200),
                          (lt.MatmulDescAttribute.BIAS_POINTER, 0x7F0000003400),
                          (lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER, 0x7F0000005600)):
            assert set_(attr, ptr) == 0
            assert lt.matmul_desc_get_attribute(desc, attr) == ptr
        assert set_(lt.MatmulDescAttribute.BIAS_POINTER, 0) == 0
        assert not lt.matmul_desc_get_attribute(desc, lt.MatmulDescAttribute.BIAS_POINTER)
    finally:
        lt.matmul_desc_destroy(desc)


def test_pointer_setter_patches_one_prebuilt_buffer(monkeypatch):
    """The setter calls the untyped entry point with the descriptor, the attribute and a
    reference to one 8-byte buffer holding the pointer; ctypes objects are built once."""
    calls = []

    def raw(desc, attr, ref, size):
        calls.append((desc, attr, ref._obj, size.value, ref._obj.value))
        return 0

    monkeypatch.setattr(_cuda, "_raw_desc_set_function", lambda: raw)
    set_ = _cuda._pointer_setter(0x1000)
    assert set_(lt.MatmulDescAttribute.BIAS_POINTER, 0x2000) == 0
    assert set_(lt.MatmulDescAttribute.BIAS_POINTER, 0x3000) == 0
    assert set_(lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER, 0) == 0
    (d0, a0, b0, n0, v0), (d1, a1, b1, _, v1), (d2, a2, b2, _, v2) = calls
    assert d0.value == 0x1000 and d1 is d0 and d2 is d0 and n0 == 8
    assert a0.value == int(lt.MatmulDescAttribute.BIAS_POINTER) and a1 is a0
    assert a2.value == int(lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER)
    assert b1 is b0 and b2 is b0 and (v0, v1, v2) == (0x2000, 0x3000, None)


def test_function_form_checks_the_call_before_planning(gpu):
    """A miss checks the call's own values (here: c without beta) before any planning: no
    heuristics query, nothing cached."""
    a, b, c = gpu.tensor(16, 16), gpu.tensor(16, 16), gpu.tensor(16, 16)
    with pytest.raises(InvalidOperandError, match="beta must be given"):
        matmul(a, b, c)
    assert gpu.pref_calls == [] and len(plan_cache) == 0
