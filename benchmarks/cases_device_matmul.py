"""cuweave.device.Matmul (cuBLASDx inside numba kernels) side by side with cuBLAS via torch.

Cases:

* 100,000 independent 64x64x64 GEMMs in fp16 and fp64 in one kernel, against ``torch.bmm``
  (cuBLAS batched). cuweave kernels: the shared-memory pointer API (element loads,
  ``MM.execute(alpha, A, B, beta, C)``, one GEMM per block), the opaque-tensor API with one
  GEMM per block (cuBLASDx's 16-byte asynchronous copies, a register accumulator stored
  straight from registers), and the *pipelined* tensor kernel: ``per`` consecutive GEMMs per
  block, C staged through shared memory for 16-byte stores, with A and B either
  double-buffered in shared memory (2 stages: the copies of GEMM ``g + 1`` run while GEMM
  ``g`` computes) or in one stage (half the shared memory, so twice the blocks per SM keep
  copies in flight), at the suggested block size and a larger one. Every variant is
  reported; ``cuweave`` is the fastest, timed again round-robin with ``torch.bmm``
  (``harness.gpu_times_interleaved``). GFLOP/s counts ``2 m n k`` per GEMM.
* a fused ``relu(X @ W + bias)`` (the layer of examples/device/gemm_fused_bias_relu.py, a
  small batch of 256 rows) against cuBLASLt with the RELU_BIAS epilog (a planned
  ``cuweave.linalg.advanced.Matmul``, same operands) and torch's ``addmm`` + ``relu``. Each
  implementation is timed eagerly and as a replayed CUDA graph of 20 calls (``torch.cuda.graph``):
  at a few microseconds per call, eager launches measure the host (numba's launch costs more
  than a kernel this small), the graph measures the GPU. The ratio against cuBLASLt uses the
  graph times. cuweave variants: the example (pointer API, K-steps through shared memory),
  tensor kernels walking K in double-buffered steps, and whole-K kernels (all of one block's
  A and B rows in flight at once, one ``execute``). An empty kernel launched like the fastest
  one, timed the same way, shows the floor of a kernel this small.
* compile time of a new configuration (traits + LTO-IR) and of a cached one in a new process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
from harness import gpu_time_ms, gpu_times_interleaved, peer

BATCH, S = 100_000, 64
PER = (1, 2, 4, 8, 16)       # GEMMs per block tried with the pipelined kernel
STAGES = (1, 2)              # A/B buffers in shared memory of the pipelined kernel
# block sizes of the pipelined kernel: cuBLASDx's suggestion (fp16: 64 threads, fp64: 128)
# and larger ones, more warps to hide the latency of each GEMM's loads and MMAs (H200
# 2026-12-02, results/device_matmul_batched_probe.md: fp16 fastest at 256 threads, fp64 at
# 256; fp64 at 512 threads was 20% slower and is left out)
BLOCKS = {"float16": ("suggested", 128, 256), "float64": ("suggested", 256)}
GRAPH_CALLS = 20
ROUNDS = 7                   # round-robin rounds of the final comparisons
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples", "device")


def run(results, quick: bool) -> None:
    iters = 10 if quick else 50
    batch = 20_000 if quick else BATCH
    _prewarm()
    for dtype in (np.float16, np.float64):
        _batched(results, dtype, batch, iters)
    _fused(results, iters)
    _compile_times(results)


# (what, dtype or tile) of every kernel below; their cuBLASDx code is generated first, in
# parallel processes (one compilation per GEMM description).
_FUSED_TILES = ((32, 32, 64), (64, 64, 64), (32, 32, 512), (16, 32, 512))
_BATCHED = [(what, dt) for dt in ("float16", "float64") for what in ("pointer", "tensor")]
_BATCHED += [("pipelined", (dt, block, stages)) for dt, blocks in BLOCKS.items()
             for block in blocks for stages in STAGES]
_KERNELS = _BATCHED + [("fused", None)] + [("fused", tile) for tile in _FUSED_TILES]


def _example_module():
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import gemm_fused_bias_relu as ex

    return ex


def _batched_mm(dtype, sm=None, block_size="suggested"):
    from cuweave.device import MAX_ALIGNMENT
    from cuweave.device.matmul import Matmul

    # 16-byte aligned operands (MAX_ALIGNMENT): cuBLASDx's vector loads of shared memory
    # (ldmatrix) instead of element loads
    return Matmul((S, S, S), dtype, "real", arrangement=("row_major",) * 3,
                  block_size=block_size, alignment=MAX_ALIGNMENT, sm=sm)


def _build(what, arg, sm=None):
    """``(kernel, signature)`` of one benchmark kernel (see ``_KERNELS``): ``arg`` is the
    dtype name of the pointer and tensor kernels, ``(dtype name, block size, stages)`` of the
    pipelined one, the tile (or None: the example's kernel) of the fused one."""
    from numba.cuda import types

    if what == "fused":
        ex = _example_module()
        kernel = ex.build()[1] if arg is None else _fused_kernel(*arg, sm=sm)[1]
        f16, f32 = types.float16[:, ::1], types.float32
        return kernel, (f16, f16, f32[::1], f32[:, ::1])
    if what == "pipelined":
        name, block, stages = arg
        kernel = _pipelined_kernel(_batched_mm(np.dtype(name).type, sm, block), stages)[0]
        arr = types.Array(_numba_type(name), 3, "C")
        return kernel, (arr, arr, arr, types.int32)
    MM = _batched_mm(np.dtype(arg).type, sm)
    kernel = {"pointer": _pointer_kernel, "tensor": _tensor_kernel}[what](MM)[0]
    arr = types.Array(_numba_type(arg), 3, "C")
    return kernel, (arr, arr, arr)


def _target(what, arg):
    """``warm_kernels`` target: ``(pyfunc, signature, sm)`` of one benchmark kernel."""
    from cuweave.device.fft import default_sm

    kernel, sig = _build(what, arg)
    return kernel.py_func, sig, default_sm()


def _prewarm(kernels=None) -> None:
    """Generate the cuBLASDx code of ``kernels`` (default: every kernel, ``_KERNELS``) first
    (libmathdx is serial and CPU-bound: one process per GEMM description); the timed runs
    then find it in the disk cache."""
    from cuweave.device._warm import warm_kernels

    kernels = _KERNELS if kernels is None else kernels
    t0 = time.perf_counter()
    try:
        errors = warm_kernels([(os.path.abspath(__file__), "_target", what, arg)
                               for what, arg in kernels])
    except Exception as e:  # not fatal: the kernels compile serially below
        errors = [f"{type(e).__name__}: {e}"]
    for e in errors:
        print(f"   prewarm: {e}")
    print(f"   prewarm of {len(kernels)} kernels: {time.perf_counter() - t0:.1f} s", flush=True)


def _allow_smem(kernel, sig, nbytes: int) -> None:
    """Let ``kernel`` launch with more than 48 KiB of dynamic shared memory (opt-in)."""
    if nbytes <= 48 * 1024:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    compiled = kernel.compile(sig)
    fn = compiled._codelibrary.get_cufunc()
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)


def _poison(array) -> None:
    """Fill a numba device array with NaN (all bits set), so unwritten elements show."""
    from numba import cuda
    from numba.cuda.cudadrv import driver

    driver.device_memset(array, 0xFF, array.nbytes)
    cuda.synchronize()


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


# ---------------------------------------------------------------------------------------------
# Batched 64x64x64 GEMMs
# ---------------------------------------------------------------------------------------------


def _pointer_kernel(MM):
    from numba import cuda

    ta = MM.a_value_type
    lda, ldb, ldc = MM.leading_dimension
    a_n, b_n, nt = MM.a_size, MM.b_size, MM.block_size

    @cuda.jit
    def kernel(a, b, c):
        g = cuda.blockIdx.x
        t = cuda.threadIdx.x
        smem = cuda.shared.array(0, dtype=ta, alignment=16)
        sa, sb, sc = smem[:a_n], smem[a_n:a_n + b_n], smem[a_n + b_n:]
        for idx in range(t, S * S, nt):                      # all row-major
            i, j = idx // S, idx % S
            sa[i * lda + j] = a[g, i, j]
            sb[i * ldb + j] = b[g, i, j]
            sc[i * ldc + j] = 0
        cuda.syncthreads()
        MM.execute(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        for idx in range(t, S * S, nt):
            c[g, idx // S, idx % S] = sc[(idx // S) * ldc + idx % S]

    return kernel, MM.get_shared_storage_size()


def _tensor_kernel(MM):
    """One GEMM per block: 16-byte asynchronous copies of A and B, a register accumulator
    stored from registers."""
    from numba import cuda

    from cuweave.device.matmul import clear, copy, copy_fragment, copy_wait, make_tensor

    ta = MM.a_value_type
    la, lb, lc = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b(), MM.suggest_layout_rmem_c()
    b_off = _round_up(la.cosize, 16 // np.dtype(ta).itemsize)

    @cuda.jit
    def kernel(a, b, c):
        g = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=ta, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[b_off:b_off + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=ta), lc)
        copy(make_tensor(a[g], MM.get_layout_gmem_a()), sa, alignment=16)   # 16 B vectors
        copy(make_tensor(b[g], MM.get_layout_gmem_b()), sb, alignment=16)
        clear(acc)
        copy_wait()
        MM.execute(sa, sb, acc)
        copy_fragment(acc, make_tensor(c[g], MM.get_layout_gmem_c()))

    return kernel, (b_off + lb.cosize) * np.dtype(ta).itemsize


def _pipelined_kernel(MM, stages=2):
    """``per`` consecutive GEMMs per block (the last argument). With 2 ``stages``, A and B of
    GEMM ``g + 1`` are copied asynchronously into the other half of shared memory while GEMM
    ``g`` computes; with 1, after GEMM ``g``'s C has left shared memory (half the shared
    memory per block). C goes from the register accumulator to shared memory (over the A/B
    buffer just used) and out in 16-byte stores."""
    from numba import cuda

    from cuweave.device.matmul import clear, copy, copy_fragment, copy_wait, make_tensor

    ta = MM.a_value_type
    la, lb, lc = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b(), MM.suggest_layout_rmem_c()
    ls = MM.suggest_layout_smem_c()
    vec = 16 // np.dtype(ta).itemsize                        # elements per 16 bytes
    b_off = _round_up(la.cosize, vec)
    stage = _round_up(max(b_off + lb.cosize, ls.cosize), vec)

    @cuda.jit
    def kernel(a, b, c, per):
        first = cuda.blockIdx.x * per
        last = min(first + per, a.shape[0])
        smem = cuda.shared.array(0, dtype=ta, alignment=16)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=ta), lc)
        if first < last:
            copy(make_tensor(a[first], MM.get_layout_gmem_a()),
                 make_tensor(smem[:la.cosize], la), alignment=16)
            copy(make_tensor(b[first], MM.get_layout_gmem_b()),
                 make_tensor(smem[b_off:b_off + lb.cosize], lb), alignment=16)
        for g in range(first, last):
            cur = ((g - first) % stages) * stage
            nxt = ((g + 1 - first) % stages) * stage
            copy_wait()                       # this GEMM's A and B are in; the block synced
            if stages == 2 and g + 1 < last:
                copy(make_tensor(a[g + 1], MM.get_layout_gmem_a()),
                     make_tensor(smem[nxt:nxt + la.cosize], la), alignment=16)
                copy(make_tensor(b[g + 1], MM.get_layout_gmem_b()),
                     make_tensor(smem[nxt + b_off:nxt + b_off + lb.cosize], lb), alignment=16)
            clear(acc)
            MM.execute(make_tensor(smem[cur:cur + la.cosize], la),
                       make_tensor(smem[cur + b_off:cur + b_off + lb.cosize], lb), acc)
            cuda.syncthreads()                # A and B of this stage are read
            sc = make_tensor(smem[cur:cur + ls.cosize], ls)
            copy_fragment(acc, sc)
            cuda.syncthreads()
            copy(sc, make_tensor(c[g], MM.get_layout_gmem_c()), alignment=16)
            if stages == 1 and g + 1 < last:
                cuda.syncthreads()            # C has left the one stage: refill it
                copy(make_tensor(a[g + 1], MM.get_layout_gmem_a()),
                     make_tensor(smem[nxt:nxt + la.cosize], la), alignment=16)
                copy(make_tensor(b[g + 1], MM.get_layout_gmem_b()),
                     make_tensor(smem[nxt + b_off:nxt + b_off + lb.cosize], lb), alignment=16)

    return kernel, stages * stage * np.dtype(ta).itemsize


def _batched_variants(dtype, batch, pipelined_only=False):
    """``{label: (launch(da, db, dc), shared bytes)}`` of every batched kernel."""
    from numba.cuda import types

    name = np.dtype(dtype).name
    arr = types.Array(_numba_type(dtype), 3, "C")
    out = {}
    for label, build in (() if pipelined_only else
                         (("pointer", _pointer_kernel), ("tensor", _tensor_kernel))):
        try:
            MM = _batched_mm(dtype)  # traits from the cache after the first
            kernel, smem = build(MM)
            _allow_smem(kernel, (arr, arr, arr), smem)
            out[label] = (kernel[batch, MM.block_dim, 0, smem], smem)
        except Exception as e:  # reported, the other variants still run
            print(f"   {label} variant unavailable: {type(e).__name__}: {e}")
    for block in BLOCKS[name]:
        for stages in STAGES:
            try:
                MM = _batched_mm(dtype, block_size=block)
                kernel, smem = _pipelined_kernel(MM, stages)
                _allow_smem(kernel, (arr, arr, arr, types.int32), smem)
            except Exception as e:
                print(f"   pipelined {block} x{stages} unavailable: {type(e).__name__}: {e}")
                continue
            threads = MM.block_dim[0]
            for per in PER:
                launch = kernel[-(-batch // per), MM.block_dim, 0, smem]
                out[f"pipelined {threads} threads {stages} stage{'s' * (stages > 1)} "
                    f"{per}/block"] = (
                    lambda da, db, dc, launch=launch, per=per: launch(da, db, dc, np.int32(per)),
                    smem)
    return out


def _batched(results, dtype, batch, iters, pipelined_only=False):
    from numba import cuda

    name = np.dtype(dtype).name
    case = f"{batch} GEMMs {S}x{S}x{S} {name}"
    flop = 2.0 * S ** 3 * batch
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (batch, S, S)).astype(dtype)
    b = rng.uniform(-1, 1, (batch, S, S)).astype(dtype)
    da, db = cuda.to_device(a), cuda.to_device(b)
    dc = cuda.device_array((batch, S, S), dtype)
    sample = np.r_[0:64, batch - 64:batch]                   # first and last GEMMs
    ref = a[sample].astype(np.float64) @ b[sample].astype(np.float64)

    def result():
        return np.concatenate([dc[:64].copy_to_host(), dc[batch - 64:].copy_to_host()])

    best = None  # (label, screening ms, rel err, launch)
    for label, (launch, smem) in _batched_variants(dtype, batch, pipelined_only).items():
        try:
            _poison(dc)
            launch(da, db, dc)
            got = result().astype(np.float64)
            err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            ms = gpu_time_ms(lambda launch=launch: launch(da, db, dc), iters=iters)
        except Exception as e:
            print(f"   {label} failed: {type(e).__name__}: {e}")
            continue
        print(f"   {case} {label}: {ms:.3f} ms, rel err {err:.1e}", flush=True)
        results.add(case=case, impl=f"cuweave {label}", metric="GFLOP/s", value=flop / ms / 1e6,
                    unit="GFLOP/s", ms=ms, rel_err=err, shared_bytes=smem)
        if err < (1e-2 if dtype == np.float16 else 1e-12) and (best is None or ms < best[1]):
            best = (label, ms, err, launch)
    if best is None:
        return
    # the fastest variant timed again, round-robin with torch.bmm: the best of many screened
    # variants is biased towards a lucky measurement, and the clocks drift over a run
    impls = {"cuweave": lambda launch=best[3]: launch(da, db, dc)}
    torch = peer("torch")
    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        impls["torch.bmm"] = lambda: torch.bmm(ta, tb)
    times = gpu_times_interleaved(impls, iters=iters, warmup=3, rounds=ROUNDS)
    for impl, ms in times.items():
        meta = {"rel_err": best[2], "variant": best[0]} if impl == "cuweave" else {}
        results.add(case=case, impl=impl, metric="GFLOP/s", value=flop / ms / 1e6,
                    unit="GFLOP/s", ms=ms, **meta)
    if "torch.bmm" in times:
        results.add_ratio(case=case, metric="GFLOP/s", num="cuweave", den="torch.bmm",
                          higher_is_better=True, target=1.0)


def _numba_type(dtype):
    from numba.np.numpy_support import from_dtype

    return from_dtype(np.dtype(dtype))


# ---------------------------------------------------------------------------------------------
# Fused relu(X W + b)
# ---------------------------------------------------------------------------------------------


def _fused_kernel(tm, tn, tk, sm=None):
    """relu(X W + b) on ``tm x tn`` tiles: K walked in ``tk`` steps whose A and B tiles are
    double-buffered (the copies of step ``k + 1`` run during step ``k``; one step when ``tk``
    is the whole K), a register accumulator, the bias and the ReLU applied in registers
    through the partitioner (``map_fragment_index``) and the tile stored from registers."""
    from numba import cuda

    from cuweave.device import MAX_ALIGNMENT
    from cuweave.device.matmul import Matmul, copy, copy_wait, make_tensor

    MM = Matmul((tm, tn, tk), (np.float16, np.float16, np.float32), "real",
                arrangement=("row_major",) * 3, block_size="suggested",
                alignment=MAX_ALIGNMENT, sm=sm)
    la, lb = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
    b_off = _round_up(la.cosize, 8)
    stage = _round_up(b_off + lb.cosize, 8)
    stages = 2 if tk < _example_module().IN else 1

    @cuda.jit
    def kernel(x, w, bias, y):
        r0, c0 = cuda.blockIdx.y * tm, cuda.blockIdx.x * tn
        smem = cuda.shared.array(0, dtype=np.float16, alignment=16)
        acc = MM.suggest_accumulator()
        steps = x.shape[1] // tk
        copy(make_tensor(x[r0:r0 + tm, 0:tk], MM.get_layout_gmem_a()),
             make_tensor(smem[:la.cosize], la), alignment=16)
        copy(make_tensor(w[0:tk, c0:c0 + tn], MM.get_layout_gmem_b()),
             make_tensor(smem[b_off:b_off + lb.cosize], lb), alignment=16)
        for s in range(steps):
            cur = (s % stages) * stage
            nxt = stage - cur
            copy_wait()
            if s + 1 < steps:
                k1 = (s + 1) * tk
                copy(make_tensor(x[r0:r0 + tm, k1:k1 + tk], MM.get_layout_gmem_a()),
                     make_tensor(smem[nxt:nxt + la.cosize], la), alignment=16)
                copy(make_tensor(w[k1:k1 + tk, c0:c0 + tn], MM.get_layout_gmem_b()),
                     make_tensor(smem[nxt + b_off:nxt + b_off + lb.cosize], lb), alignment=16)
            MM.execute(make_tensor(smem[cur:cur + la.cosize], la),
                       make_tensor(smem[cur + b_off:cur + b_off + lb.cosize], lb), acc)
            cuda.syncthreads()                        # this stage is refilled next step
        res = acc.get_results()
        if acc.is_thread_active():
            for i in range(res.layout.cosize):
                if acc.is_index_in_bounds(i):
                    col = acc.map_fragment_index(i)[1]
                    v = res[i] + bias[c0 + col]
                    res[i] = v if v > 0 else 0.0
        acc.partition_and_copy(res, make_tensor(y[r0:r0 + tm, c0:c0 + tn],
                                                MM.get_layout_gmem_c()))

    return MM, kernel, stages * stage * 2


def _fused_variants(ex):
    """``{label: (kernel, grid, block, shared bytes)}`` of the cuweave fused kernels."""
    from numba.cuda import types

    sig = (types.float16[:, ::1], types.float16[:, ::1], types.float32[::1],
           types.float32[:, ::1])
    makers = {"pointer (example)": lambda: ex.build() + ((ex.TM, ex.TN),)}
    for tm, tn, tk in _FUSED_TILES:
        kind = "whole-K" if tk == ex.IN else "K-steps"
        makers[f"tensor {kind} {tm}x{tn}x{tk}"] = (
            lambda t=(tm, tn, tk): _fused_kernel(*t) + (t[:2],))
    out = {}
    for label, make in makers.items():
        try:
            MM, kernel, smem, (tm, tn) = make()
            _allow_smem(kernel, sig, smem)
            out[label] = (kernel, (ex.OUT // tn, ex.ROWS // tm), MM.block_dim, smem)
        except Exception as e:
            print(f"   {label} unavailable: {type(e).__name__}: {e}")
    return out


def _graph_ms(torch, fn, iters) -> float:
    """GPU ms per call of ``fn(stream)`` replayed as a CUDA graph of ``GRAPH_CALLS`` calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                 # warm-up outside the capture
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(GRAPH_CALLS):
            fn()
    return gpu_time_ms(g.replay, iters=max(iters // 5, 3)) / GRAPH_CALLS


def _on_torch_stream(torch, launch):
    """``launch`` configured for torch's current stream at each call (the capture stream
    inside ``torch.cuda.graph``)."""
    from numba import cuda

    kernel, grid, block, smem = launch

    def call(*args):
        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        kernel[grid, block, stream, smem](*args)

    return call


def _fused_inputs(ex):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (ex.ROWS, ex.IN)).astype(np.float16)
    w = rng.uniform(-1, 1, (ex.IN, ex.OUT)).astype(np.float16)
    bias = rng.uniform(-1, 1, ex.OUT).astype(np.float32)
    return x, w, bias, np.maximum(x.astype(np.float64) @ w + bias, 0)


def _fused(results, iters):
    from numba import cuda

    ex = _example_module()
    torch = peer("torch")
    graphs = torch is not None and torch.cuda.is_available()
    case = f"relu(X@W+b) {ex.ROWS}x{ex.IN} @ {ex.IN}x{ex.OUT} fp16"
    x, w, bias, ref = _fused_inputs(ex)
    args = (cuda.to_device(x), cuda.to_device(w), cuda.to_device(bias),
            cuda.device_array((ex.ROWS, ex.OUT), np.float32))
    best = None
    for label, launch in _fused_variants(ex).items():
        try:
            kernel, grid, block, smem = launch
            eager = kernel[grid, block, 0, smem]
            _poison(args[3])
            eager(*args)
            err = float(np.linalg.norm(args[3].copy_to_host() - ref) / np.linalg.norm(ref))
            ms = gpu_time_ms(lambda eager=eager: eager(*args), iters=iters)
            call = _on_torch_stream(torch, launch) if graphs else None
            g_ms = _graph_ms(torch, lambda call=call: call(*args), iters) if graphs else ms
        except Exception as e:
            print(f"   {label} failed: {type(e).__name__}: {e}")
            continue
        print(f"   {case} {label}: {ms * 1e3:.1f} us eager, {g_ms * 1e3:.1f} us in a graph, "
              f"rel err {err:.1e}", flush=True)
        results.add(case=case, impl=f"cuweave {label}", metric="ms", value=g_ms, unit="ms",
                    eager_ms=ms, rel_err=err)
        if err < 1e-2 and (best is None or g_ms < best[1]):
            best = (label, g_ms, err, ms, launch)
    if best is None:
        return
    results.add(case=case, impl="cuweave", metric="ms", value=best[1], unit="ms",
                eager_ms=best[3], rel_err=best[2], variant=best[0])
    if graphs:
        _launch_floor(results, case, torch, best[4], args, iters)
        _fused_peers(results, case, torch, x, w, bias, iters)


def _launch_floor(results, case, torch, launch, args, iters):
    """An empty kernel with the fastest variant's grid, block and shared memory, timed as the
    variants are: what a kernel this small costs before it does anything."""
    from numba import cuda
    from numba.cuda import types

    @cuda.jit
    def empty(x, w, bias, y):
        pass

    _, grid, block, smem = launch
    try:  # diagnostics: a failure here must not cost the peers' rows
        _allow_smem(empty, (types.float16[:, ::1], types.float16[:, ::1], types.float32[::1],
                            types.float32[:, ::1]), smem)
        call = _on_torch_stream(torch, (empty, grid, block, smem))
        g_ms = _graph_ms(torch, lambda: call(*args), iters)
    except Exception as e:
        print(f"   empty-kernel floor failed: {type(e).__name__}: {e}")
        return
    print(f"   {case} empty kernel: {g_ms * 1e3:.1f} us in a graph", flush=True)
    results.add(case=case, impl="empty kernel, same launch (floor)", metric="ms", value=g_ms,
                unit="ms")


def _fused_peers(results, case, torch, x, w, bias, iters):
    """cuBLASLt's RELU_BIAS epilog (a planned Matmul, cuweave.linalg.advanced) and torch's
    addmm + relu on the same operands, timed like the cuweave kernels."""
    tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
    tb = torch.from_numpy(bias).cuda().half()
    peers = {"torch addmm+relu": lambda: torch.relu(torch.addmm(tb, tx, tw))}
    try:
        from cuweave.linalg.advanced import Matmul, MatmulEpilog

        lt = Matmul(tx, tw)
        lt.plan(epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": tb})
        peers = {"cuBLASLt RELU_BIAS": lt.execute, **peers}
        got = lt.execute().float().cpu().numpy()
        ref = np.maximum(x.astype(np.float64) @ w + bias.astype(np.float16), 0)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        print(f"   cuBLASLt RELU_BIAS rel err {err:.1e}")
    except Exception as e:
        print(f"   cuBLASLt epilog failed: {type(e).__name__}: {e}")
    for name, fn in peers.items():
        try:
            ms = gpu_time_ms(fn, iters=iters)
            g_ms = _graph_ms(torch, fn, iters)
        except Exception as e:
            print(f"   {name} failed: {type(e).__name__}: {e}")
            continue
        print(f"   {case} {name}: {ms * 1e3:.1f} us eager, {g_ms * 1e3:.1f} us in a graph",
              flush=True)
        results.add(case=case, impl=name, metric="ms", value=g_ms, unit="ms", eager_ms=ms)
        results.add_ratio(case=case, metric="ms", num="cuweave", den=name,
                          higher_is_better=False, target=1.5 if "cuBLASLt" in name else None)


_COMPILE = """\
import time, numpy as np
t0 = time.perf_counter()
from cuweave.device.matmul import Matmul
from cuweave.device import _blas_numba
mm = Matmul(({m}, {n}, {k}), np.float32, "real", arrangement=("row_major", "col_major",
            "col_major"), block_size=64)
_blas_numba._execute_code(mm)
print(time.perf_counter() - t0)
"""


def _compile_times(results):
    """A never-seen configuration (traits + execute LTO-IR), then the same in a new process."""
    case = "new configuration -> LTO-IR"
    m, n, k = 24 + int(time.time()) % 8 * 4, 40, 28      # unlikely to be in the cache
    code = _COMPILE.format(m=m, n=n, k=k)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for impl in ("new", "cached"):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=300)
        if proc.returncode != 0:
            print(f"   compile-time probe failed: {proc.stderr[-500:]}")
            return
        seconds = float(proc.stdout.strip().splitlines()[-1])
        results.add(case=case, impl=f"cuweave {impl}", metric="s", value=seconds, unit="s",
                    size=[m, n, k], target_max=5.0 if impl == "new" else 1.0)
