"""cuweave.device.FFT (cuFFTDx inside a numba kernel) side by side with cuFFT via CuPy/torch.

Cases (complex64, 65536 transforms of 256 points):

* standalone forward FFT, global → registers → FFT → global, for a few
  (elements_per_thread, ffts_per_block) choices, each with the data read and written as
  complex64 (two 4-byte accesses per element in numba), through ``float32x2`` views (one
  8-byte access), with streaming (evict-first) 8-byte accesses (``cuweave.device.ldcs``/
  ``stcs``), and 16-byte accesses of element pairs, plain and streaming (see
  ``_block_fft_kernel``), against ``cupy.fft.fft`` and ``torch.fft.fft``; GB/s counts bytes
  read + written;
* a convolution ``ifft(fft(x) * h)``: one cuweave kernel (forward FFT, pointwise filter,
  inverse FFT, scaling) against CuPy's three passes (fft → multiply → ifft);
* the same convolution in half precision (``precision=np.float16``: two FFTs per
  ``float16x4`` value, data read and written as float16) against the FP32 fused kernel;
* every ratio comes from the chosen variant and its peers measured round-robin in one call of
  ``harness.gpu_times_interleaved`` (the screening of the variants is reported too);
* how long a new configuration takes to compile (fresh cache, in a fresh process: the first
  one, then a second one in the same process; and cuFFTDx's twiddle tables, compiled once per
  machine and architecture when a kernel first links an FFT), and how fast a second process is
  ready when the configuration is in the disk cache.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
from harness import gpu_time_ms, gpu_times_interleaved, peer

BATCH, N = 65536, 256
# (elements_per_thread, ffts_per_block) tried for the standalone FFT; the fastest is reported
KNOBS = ((8, "suggested"), (8, 4), (16, "suggested"), (16, 4), (16, 16), (16, 32), (32, 4),
         (32, 8))
# cuFFTDx's database tunes 256-point FP16 block FFTs at (8, 8), (8, 16), (16, 16), (32, 16),
# (32, 32) on sm_90 (FFT.valid); the last is left out (fewer, larger blocks)
HALF_KNOBS = ((4, 4), (4, 8), (8, 4), (8, 8), (8, 16), (16, 8), (16, 16), (32, 16))
# how kernels move data between global memory and the FFT (see _block_fft_kernel)
IO_VARIANTS = ("complex", "vector", "stream", "wide", "stream16")
TOLERANCE = 1e-5  # relative error (complex64 FFTs of 256 points: ~1e-7); larger ones lose
HALF_TOLERANCE = 1e-2  # float16 data and FFTs: ~1e-3
# each knob choice is screened on its own; the fastest is then measured again, round-robin with
# the implementations it is compared with (ROUNDS rounds, median): the ratios are not biased by
# picking the minimum of noisy screenings, nor by clock drift between separate measurements
ROUNDS = 9
CONFIGS = [dict(fft_type="c2c", size=N, precision=np.float32, direction=d,
                elements_per_thread=e, ffts_per_block=b) for d in ("forward", "inverse")
           for e, b in KNOBS]
HALF_CONFIGS = [dict(fft_type="c2c", size=N, precision=np.float16, direction=d,
                     elements_per_thread=e, ffts_per_block=b) for d in ("forward", "inverse")
                for e, b in HALF_KNOBS]


def run(results, quick: bool) -> None:
    import cuweave.device as dx

    iters = 20 if quick else 100
    _compile_time(results)  # first: it needs configurations no process has compiled yet
    ffts = dx.warm_cache(CONFIGS + HALF_CONFIGS)  # compiled in parallel (or from the cache)
    n, h = len(KNOBS), len(HALF_KNOBS)
    fwd, inv = ffts[:n], ffts[n:2 * n]
    best = _standalone(results, fwd, iters)
    data = _convolution(results, list(zip(fwd, inv)), iters)
    _half_convolution(results, list(zip(ffts[2 * n:2 * n + h], ffts[2 * n + h:])), iters, data)
    _cache_ready(results, CONFIGS[best])


def _block_fft_kernel(fft, io: str):
    """The standalone kernel, global -> FFT -> global, with the data moved one of five ways:

    * ``complex``: ``td[i] = x[b, j]`` on the complex64 arrays. numba aligns complex64 to 4
      bytes, so each element is two 4-byte accesses;
    * ``vector``: the same through ``x.view(float32x2_type)``: one 8-byte access per element;
    * ``stream``: one 8-byte streaming access per element (``cuweave.device.ldcs``/``stcs``:
      ``ld.global.cs.v2.f32``, evict-first, as every element is touched once);
    * ``wide`` / ``stream16``: 16-byte accesses (plain / streaming ``.v4.f32``) of two
      neighbouring elements through ``x.view(float32x4_type)``. A thread holds elements
      ``t + i * stride``, so neighbours ``2k + i * stride`` and ``2k + 1 + i * stride`` belong to
      lanes ``2k`` and ``2k + 1``: the even lane moves the pair of element ``i``, the odd lane the
      pair of element ``i + 1``, and each hands one element to the other (``shfl.xor`` of
      its two floats).

    (Two more ways were measured on the H200 and dropped: 16-byte copies into shared memory and
    cuFFTDx's shared-memory API ``execute(smem)``, 2180-3130 GB/s, below the first two; and
    blocks looping over 2, 4 or 8 groups of FFTs, loading the next group into a second register
    array while the current one's FFT runs, 3172-3720 GB/s against 3754-3837 for ``vector``
    and ``stream`` in the same run, more groups per block faster but never ahead:
    ``benchmarks/results/device_fft_prefetch_probe.md``.)
    Returns ``None`` where a way does not apply (the 16-byte ones need an even
    ``elements_per_thread`` and ``stride``).
    """
    from numba import cuda

    from cuweave.device import float32x2, float32x2_type, float32x4, float32x4_type, ldcs, stcs

    execute, storage, vt = fft.execute, fft.storage_size, fft.value_type
    ept, stride, fpb = fft.elements_per_thread, fft.stride, fft.ffts_per_block
    if io in ("wide", "stream16") and (ept % 2 or stride % 2):
        return None
    half = stride // 2
    device = cuda.jit(device=True, forceinline=True)

    if io in ("complex", "vector"):  # the kernel as first measured
        vector = io == "vector"

        @cuda.jit
        def kernel(x, y):
            td = cuda.local.array(storage, dtype=vt)
            smem = cuda.shared.array(0, dtype=vt)
            b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
            xs = x.view(float32x2_type) if vector else x
            ys = y.view(float32x2_type) if vector else y
            for i in range(ept):
                td[i] = xs[b, cuda.threadIdx.x + i * stride]
            execute(td, smem)
            for i in range(ept):
                ys[b, cuda.threadIdx.x + i * stride] = td[i]

        return kernel

    if io == "stream":

        @device
        def load(td, x, b, t):
            for i in range(ept):
                td[i] = ldcs(x, (b, t + i * stride))

        @device
        def store(td, y, b, t):
            for i in range(ept):
                stcs(y, (b, t + i * stride), td[i])

    else:
        if io == "stream16":
            get, put = ldcs, stcs
        else:
            @device
            def get(a, index):
                return a[index]

            @device
            def put(a, index, value):
                a[index] = value

        @device
        def load(td, x, b, t):
            x4, odd, mask = x.view(float32x4_type), t & 1, cuda.activemask()
            for i in range(0, ept, 2):
                v = get(x4, (b, t // 2 + (i + odd) * half))  # elements (t & ~1, t | 1)
                # the even lane keeps the first of its pair and sends the second; the odd lane
                # keeps the second and sends the first (selects: td stays in registers)
                keep_re, keep_im = (v.z, v.w) if odd else (v.x, v.y)
                got_re = cuda.shfl_xor_sync(mask, v.x if odd else v.z, 1)
                got_im = cuda.shfl_xor_sync(mask, v.y if odd else v.w, 1)
                td[i] = float32x2(got_re, got_im) if odd else float32x2(keep_re, keep_im)
                td[i + 1] = float32x2(keep_re, keep_im) if odd else float32x2(got_re, got_im)

        @device
        def store(td, y, b, t):
            y4, odd, mask = y.view(float32x4_type), t & 1, cuda.activemask()
            for i in range(0, ept, 2):
                a, c = td[i], td[i + 1]
                send = a if odd else c
                got = float32x2(cuda.shfl_xor_sync(mask, send.real, 1),
                                cuda.shfl_xor_sync(mask, send.imag, 1))
                lo, hi = (got, float32x2(c)) if odd else (float32x2(a), got)
                put(y4, (b, t // 2 + (i + odd) * half), float32x4(lo.x, lo.y, hi.x, hi.y))

    @cuda.jit
    def kernel(x, y):
        td = cuda.local.array(storage, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        load(td, x, b, cuda.threadIdx.x)
        execute(td, smem)
        store(td, y, b, cuda.threadIdx.x)

    return kernel


def _resources(kernel) -> dict:
    """Registers and local memory per thread of a compiled numba kernel (diagnostics)."""
    out = {}
    for name, getter in (("regs", "get_regs_per_thread"), ("local_bytes",
                                                             "get_local_mem_per_thread")):
        try:
            value = getattr(kernel, getter)()
            out[name] = int(next(iter(value.values())) if isinstance(value, dict) else value)
        except Exception:  # diagnostics only
            pass
    return out


def _gbps(ms: float) -> float:
    return 2 * BATCH * N * 8 / (ms * 1e-3) / 1e9


def _standalone(results, ffts, iters):
    from numba import cuda

    case = f"c2c fwd {BATCH}x{N} complex64"
    rng = np.random.default_rng(0)
    host = (rng.standard_normal((BATCH, N)) + 1j * rng.standard_normal((BATCH, N)))
    host = host.astype(np.complex64)
    x, y = cuda.to_device(host), cuda.device_array((BATCH, N), np.complex64)
    zeros = np.zeros_like(host)
    ref = np.fft.fft(host.astype(np.complex128), axis=-1)
    best, best_ms = None, None
    for index, fft in enumerate(ffts):
        for io in IO_VARIANTS:
            kernel = _block_fft_kernel(fft, io)
            if kernel is None:
                continue
            launch = kernel[BATCH // fft.ffts_per_block, fft.block_dim, 0, fft.shared_memory_size]
            y.copy_to_device(zeros)  # a variant must not pass on an earlier one's output
            launch(x, y)
            err = np.linalg.norm(y.copy_to_host() - ref) / np.linalg.norm(ref)
            ms = gpu_time_ms(lambda launch=launch: launch(x, y), iters=iters, warmup=3)
            label = f"cuweave {io} ept={fft.elements_per_thread} fpb={fft.ffts_per_block}"
            results.add(case=case, impl=label, metric="GB/s", value=_gbps(ms), unit="GB/s",
                        ms=ms, rel_err=float(err), **_resources(kernel))
            if err < TOLERANCE and (best_ms is None or ms < best_ms):
                best, best_ms, best_io, best_launch = index, ms, io, launch
    impls = {"cuweave": lambda: best_launch(x, y)}
    cupy, torch = peer("cupy"), peer("torch")
    if cupy is not None:
        xc = cupy.asarray(host)
        impls["cupy.fft"] = lambda: cupy.fft.fft(xc, axis=-1)
    if torch is not None and torch.cuda.is_available():
        xt = torch.from_numpy(host).cuda()
        impls["torch.fft"] = lambda: torch.fft.fft(xt, dim=-1)
    times = gpu_times_interleaved(impls, iters=iters, warmup=3, rounds=ROUNDS)
    knobs = dict(elements_per_thread=ffts[best].elements_per_thread,
                 ffts_per_block=ffts[best].ffts_per_block, io=best_io)
    for name, ms in times.items():
        results.add(case=case, impl=name, metric="GB/s", value=_gbps(ms), unit="GB/s", ms=ms,
                    **(knobs if name == "cuweave" else {}))
        if name != "cuweave":
            results.add_ratio(case=case, metric="GB/s", num="cuweave", den=name,
                              higher_is_better=True, target=1.0)
    return best


def _conv_kernel(fwd, inv, io: str):
    """``ifft(fft(x) * h) / N`` in one kernel; ``io`` as in :func:`_block_fft_kernel`."""
    from numba import cuda

    from cuweave.device import float32x2_type

    ex_f, ex_i, storage, vt = fwd.execute, inv.execute, fwd.storage_size, fwd.value_type
    ept, stride, fpb = fwd.elements_per_thread, fwd.stride, fwd.ffts_per_block
    scale = np.float32(1.0 / fwd.size)
    vector = io == "vector"

    @cuda.jit
    def kernel(x, h, y):
        td = cuda.local.array(storage, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        b = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        xs = x.view(float32x2_type) if vector else x
        ys = y.view(float32x2_type) if vector else y
        for i in range(ept):
            td[i] = xs[b, cuda.threadIdx.x + i * stride]
        ex_f(td, smem)
        for i in range(ept):
            td[i] = td[i] * h[cuda.threadIdx.x + i * stride] * scale
        cuda.syncthreads()  # shared memory is reused by the inverse FFT
        ex_i(td, smem)
        for i in range(ept):
            ys[b, cuda.threadIdx.x + i * stride] = td[i]

    return kernel


def _convolution(results, pairs, iters):
    """The fused kernel for each knob choice (forward, inverse); the fastest is reported."""
    from numba import cuda

    case = f"convolution fft*h ifft {BATCH}x{N} complex64"
    rng = np.random.default_rng(1)
    host = (rng.standard_normal((BATCH, N)) + 1j * rng.standard_normal((BATCH, N)))
    host = host.astype(np.complex64)
    filt = np.exp(-0.5 * (np.fft.fftfreq(N) * 12) ** 2).astype(np.complex64)
    x, h = cuda.to_device(host), cuda.to_device(filt)
    y = cuda.device_array((BATCH, N), np.complex64)
    ref = np.fft.ifft(np.fft.fft(host.astype(np.complex128), axis=-1) * filt, axis=-1)
    best_ms, zeros = None, np.zeros_like(host)
    for fwd, inv in pairs:
        for io in ("complex", "vector"):
            smem = max(fwd.shared_memory_size, inv.shared_memory_size)
            launch = _conv_kernel(fwd, inv, io)[BATCH // fwd.ffts_per_block, fwd.block_dim, 0,
                                                smem]
            y.copy_to_device(zeros)
            launch(x, h, y)
            err = np.linalg.norm(y.copy_to_host() - ref) / np.linalg.norm(ref)
            ms = gpu_time_ms(lambda launch=launch: launch(x, h, y), iters=iters, warmup=3)
            results.add(case=case, impl=f"cuweave {io} ept={fwd.elements_per_thread} "
                        f"fpb={fwd.ffts_per_block}", metric="ms", value=ms, unit="ms",
                        rel_err=float(err))
            if err < TOLERANCE and (best_ms is None or ms < best_ms):
                best_ms, best_err, best_launch = ms, err, launch
    fp32 = lambda: best_launch(x, h, y)  # noqa: E731
    impls = {"cuweave": fp32}
    cupy = peer("cupy")
    if cupy is not None:
        xc, hc = cupy.asarray(host), cupy.asarray(filt)
        impls["cupy (3 passes)"] = lambda: cupy.fft.ifft(cupy.fft.fft(xc, axis=-1) * hc, axis=-1)
    times = gpu_times_interleaved(impls, iters=iters, warmup=3, rounds=ROUNDS)
    results.add(case=case, impl="cuweave", metric="ms", value=times["cuweave"], unit="ms",
                rel_err=float(best_err))
    if cupy is not None:
        results.add(case=case, impl="cupy (3 passes)", metric="ms",
                    value=times["cupy (3 passes)"], unit="ms")
        results.add_ratio(case=case, metric="ms", num="cuweave", den="cupy (3 passes)",
                          higher_is_better=False, target=3.0)
    return {"host": host, "filter": filt, "ref": ref, "fp32": fp32}


def _half_conv_kernel(fwd, inv, io: str):
    """Half-precision fused convolution: FFT pairs ``(2p, 2p+1)`` share one ``float16x4``.
    The filter is applied in half precision (float16 arithmetic on the components).
    ``io="complex"`` reads and writes each float16 on its own; ``"vector"`` moves each
    (re, im) pair as one ``float16x2`` (4 bytes)."""
    from numba import cuda

    from cuweave.device import float16x2, float16x2_type, float16x4

    ept, stride = fwd.elements_per_thread, fwd.stride
    vector = io == "vector"

    @cuda.jit
    def kernel(x, h, y):
        td = cuda.local.array(fwd.storage_size, dtype=fwd.value_type)
        smem = cuda.shared.array(0, dtype=fwd.value_type)
        r0 = 2 * (cuda.blockIdx.x * fwd.block_dim.y + cuda.threadIdx.y)
        r1 = r0 + 1
        xv, yv = x.view(float16x2_type), y.view(float16x2_type)
        for i in range(ept):
            k = cuda.threadIdx.x + i * stride
            if vector:
                a, b = xv[r0, k, 0], xv[r1, k, 0]
                td[i] = float16x4(a.x, b.x, a.y, b.y)
            else:
                td[i] = float16x4(x[r0, k, 0], x[r1, k, 0], x[r0, k, 1], x[r1, k, 1])
        fwd.execute(td, smem)
        hv = h.view(float16x2_type)
        for i in range(ept):  # the filter in half precision: (re0, re1, im0, im1) * (hr + i hi)
            v, g = td[i], hv[cuda.threadIdx.x + i * stride, 0]
            td[i] = float16x4(v.x * g.x - v.z * g.y, v.y * g.x - v.w * g.y,
                              v.x * g.y + v.z * g.x, v.y * g.y + v.w * g.x)
        cuda.syncthreads()  # shared memory is reused by the inverse FFT
        inv.execute(td, smem)
        for i in range(ept):
            k = cuda.threadIdx.x + i * stride
            v = td[i]
            if vector:
                yv[r0, k, 0] = float16x2(v.x, v.z)
                yv[r1, k, 0] = float16x2(v.y, v.w)
            else:
                y[r0, k, 0], y[r1, k, 0], y[r0, k, 1], y[r1, k, 1] = v.x, v.y, v.z, v.w

    return kernel


def _half_convolution(results, pairs, iters, data):
    """The FP16 fused convolution (data read/written as float16) against the FP32 one."""
    from numba import cuda

    case = f"convolution fft*h ifft {BATCH}x{N} float16 vs complex64"
    host = np.stack([data["host"].real, data["host"].imag], axis=-1).astype(np.float16)
    filt = data["filter"] / N  # the 1/N scaling folded into the filter, (re, im) in float16
    filt = np.stack([filt.real, filt.imag], axis=-1).astype(np.float16)
    x, h = cuda.to_device(host), cuda.to_device(filt)
    y = cuda.device_array(host.shape, np.float16)
    best_ms, zeros = None, np.zeros_like(host)
    for fwd, inv in pairs:
        for io in ("complex", "vector"):
            smem = max(fwd.shared_memory_size, inv.shared_memory_size)
            launch = _half_conv_kernel(fwd, inv, io)[BATCH // fwd.ffts_per_block, fwd.block_dim,
                                                     0, smem]
            y.copy_to_device(zeros)
            launch(x, h, y)
            out = y.copy_to_host().astype(np.float64)
            got = out[..., 0] + 1j * out[..., 1]
            err = float(np.linalg.norm(got - data["ref"]) / np.linalg.norm(data["ref"]))
            ms = gpu_time_ms(lambda launch=launch: launch(x, h, y), iters=iters, warmup=3)
            results.add(case=case, impl=f"cuweave fp16 {io} ept={fwd.elements_per_thread} "
                        f"fpb={fwd.ffts_per_block}", metric="ms", value=ms, unit="ms",
                        rel_err=err)
            if err < HALF_TOLERANCE and (best_ms is None or ms < best_ms):
                best_ms, best_err, best_launch = ms, err, launch
    times = gpu_times_interleaved({"fp16": lambda: best_launch(x, h, y), "fp32": data["fp32"]},
                                  iters=iters, warmup=3, rounds=ROUNDS)
    results.add(case=case, impl="cuweave fp16", metric="ms", value=times["fp16"], unit="ms",
                rel_err=best_err)
    results.add(case=case, impl="cuweave fp32", metric="ms", value=times["fp32"], unit="ms")
    results.add_ratio(case=case, metric="ms", num="cuweave fp16", den="cuweave fp32",
                      higher_is_better=False, target=1.5)


_COMPILE = """\
import os, sys, time, tempfile
os.environ["CUWEAVE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import cuweave.device as dx
t0 = time.perf_counter()
dx.FFT("c2c", 243, np.float32, "forward", sm=90)
t1 = time.perf_counter()
dx.FFT("r2c", 200, np.float64, sm=90)
t2 = time.perf_counter()
from cuweave.device import _codegen
_codegen.lut_ltoir(900)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def _compile_time(results):
    """Wall time to compile a configuration nobody has compiled (fresh cache directory)."""
    case = "new configuration compile"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode != 0:
        print(f"   {case} failed: {proc.stderr[-500:]}")
        return
    # the last three numbers printed (a library may write NULs or logs before them)
    nums = re.findall(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", proc.stdout)
    first, second, tables = (float(v) for v in nums[-3:])
    results.add(case=case, impl="cuweave first in a process", metric="s", value=first, unit="s",
                target_max=3.0)
    results.add(case=case, impl="cuweave later in the same process", metric="s", value=second,
                unit="s", target_max=3.0)
    results.add(case=case, impl="twiddle tables (once per machine and architecture)",
                metric="s", value=tables, unit="s")


_READY = """\
import time
t0 = time.perf_counter()
import numpy as np
import cuweave.device as dx
f = dx.FFT("c2c", {n}, np.float32, "forward", elements_per_thread={ept!r}, ffts_per_block={fpb!r})
t1 = time.perf_counter()
f.execute
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""


def _cache_ready(results, knobs):
    """A fresh interpreter builds an already-compiled configuration (disk cache hit)."""
    case = "second process, cached config"
    code = _READY.format(n=N, ept=knobs["elements_per_thread"], fpb=knobs["ffts_per_block"])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    if proc.returncode != 0:
        print(f"   {case} failed: {proc.stderr[-500:]}")
        return
    ready, with_execute = (float(v) for v in proc.stdout.split()[-2:])
    results.add(case=case, impl="cuweave FFT() ready", metric="s", value=ready, unit="s")
    results.add(case=case, impl="cuweave + execute (numba import)", metric="s",
                value=with_execute, unit="s")
