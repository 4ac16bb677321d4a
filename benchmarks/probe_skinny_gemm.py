"""Probe: a hand-written skinny bf16 GEMM for the few-token products of the LLM suite.

At 1 to 32 tokens the LLM products of ``cases_llm.py`` are weight-streaming: cuBLASLt (torch's
and cuweave's alike) reads the weights at 3.1-3.5 TB/s on the H200 (``results/llm.md``: e.g.
7B QKV at one token, 100 MB in 30.6 us), below the 4.3 TB/s the batched 64^3 GEMMs reach. This
probe measures whether a plain weight-streaming kernel does better, before any of it goes into
the library: ``y = act(x @ W.T + b)`` for ``x`` of ``M`` rows (``M`` a compile-time constant),
``W`` of shape ``(N, K)`` as torch's ``Linear`` holds it, one warp per ``COLS`` output columns,
16-byte streaming loads of ``W`` (each weight read once), ``x`` from L1/L2, fp32 sums reduced
across the warp, the bias and GELU (tanh) applied in fp32; and the same on tensor cores. It is
compiled with NVRTC through cuda.core and timed round-robin with every torch form of the
product, cuweave's autotuned ``Matmul`` and that Matmul's two best cuBLASLt algorithms with
split-K set (2, 4, 8: more CTAs streaming the weights; an autotune could search those too),
the weights rotated through copies as ``cases_llm`` does, so they come from HBM.

    python benchmarks/probe_skinny_gemm.py [--out DIR]

Findings on the H200 (2026-12-02, two runs; ``results/skinny_gemm_probe.md`` is the second): at
one token the CUDA-core kernel beats every torch form (7B QKV 1.05x / 1.13x, 70B QKV 1.08x /
1.12x; 3.7-4.0 TB/s of weights against cuBLASLt's 3.3-3.8), from 8 tokens on it is compute
bound (0.37-0.50x). The tensor-core kernel, one warp per column group, kept too few loads in
flight (1.1 TB/s at one token); with the block's 8 warps splitting K it reaches cuBLASLt at 16
tokens (0.99x) but not at 8 (0.89-0.94x) or 32 (0.72x: x is reloaded from L1 for every group).
Split-K of cuBLASLt's own algorithms: 0.91-1.02x. Only the one-token products gain, 2 of the
LLM suite's 20: about +1% on its geomean.

Writes ``DIR/skinny_gemm_probe.{json,md,png}`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from harness import gpu_times_interleaved, probe_main  # noqa: E402

MAX_TOKENS = 32  # the products of at most this many tokens
COLS = (1, 2, 4)  # output columns per warp (CUDA cores)
GROUPS = (1, 2, 4)  # groups of 8 output columns per warp (tensor cores)
WARPS = 8  # warps per block
ACT = {None: 0, "bias": 1, "gelu_bias": 2}

SOURCE = r"""
// bf16 as 16-bit patterns (no headers: NVRTC finds none by itself): a bf16 is the high half
// of a float
__device__ __forceinline__ float lo(unsigned int u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi(unsigned int u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ unsigned short to_bf16(float f) {  // round to nearest even
    const unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
    float s = lo(a.x) * lo(b.x);
    s = fmaf(hi(a.x), hi(b.x), s); s = fmaf(lo(a.y), lo(b.y), s); s = fmaf(hi(a.y), hi(b.y), s);
    s = fmaf(lo(a.z), lo(b.z), s); s = fmaf(hi(a.z), hi(b.z), s); s = fmaf(lo(a.w), lo(b.w), s);
    return fmaf(hi(a.w), hi(b.w), s);
}

// y[m, c] = act(sum_k x[m, k] w[c, k] + bias[c]) for m < M; one warp per COLS columns.
// k % 8 == 0, x and w 16-byte aligned. act: 0 none, 1 bias, 2 bias + GELU (tanh).
template <int M, int COLS>
__global__ void __launch_bounds__(256) skinny(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ w,
    const unsigned short* __restrict__ bias, unsigned short* __restrict__ y, int n, int k,
    int act) {
    const int lane = threadIdx.x & 31;
    const int c0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * COLS;
    if (c0 >= n) return;
    const int kv = k >> 3;  // 16-byte vectors per row
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const uint4* wv[COLS];
#pragma unroll
    for (int j = 0; j < COLS; ++j)
        wv[j] = reinterpret_cast<const uint4*>(w) + (size_t)min(c0 + j, n - 1) * kv;
    float acc[M][COLS];
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < COLS; ++j) acc[m][j] = 0.f;
#pragma unroll 4
    for (int v = lane; v < kv; v += 32) {
        uint4 wr[COLS];
#pragma unroll
        for (int j = 0; j < COLS; ++j) wr[j] = __ldcs(wv[j] + v);
#pragma unroll
        for (int m = 0; m < M; ++m) {
            const uint4 xr = __ldg(xv + (size_t)m * kv + v);
#pragma unroll
            for (int j = 0; j < COLS; ++j) acc[m][j] += dot8(xr, wr[j]);
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < COLS; ++j) {
            float s = acc[m][j];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == ((m * COLS + j) & 31) && c0 + j < n) {
                if (act >= 1) s += __uint_as_float((unsigned int)bias[c0 + j] << 16);
                if (act == 2)
                    s = 0.5f * s * (1.f + tanhf(0.7978845608f * (s + 0.044715f * s * s * s)));
                y[(size_t)m * n + c0 + j] = to_bf16(s);
            }
        }
}

__device__ __forceinline__ void mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                    unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float epilog(float s, const unsigned short* bias, int col, int act) {
    if (act >= 1) s += __uint_as_float((unsigned int)bias[col] << 16);
    if (act == 2) s = 0.5f * s * (1.f + tanhf(0.7978845608f * (s + 0.044715f * s * s * s)));
    return s;
}

// The same product on tensor cores (mma.sync m16n8k16, fp32 accumulation) for m <= 16 * TILES
// rows (the missing ones zeros): one block of WARPS warps per G groups of 8 columns, its warps
// splitting K (each warp alone on a column group keeps too few loads in flight: 1.1 TB/s in
// the first run) and summing through shared memory. Lane (r, q) = (lane / 4, lane % 4) loads
// 16 bytes of W row n0 + 8 g + r and of x rows r, r + 8 (, + 16, + 24) at k = 32 c + 8 q: two
// MMAs per 32 k, their k order permuted alike in A and B (a dot product does not depend on
// it). k % 32 == 0, n even, x and w 16-byte aligned; launched with 32 * WARPS threads.
template <int TILES, int G>
__global__ void __launch_bounds__(256) skinny_tc(
    const unsigned short* __restrict__ x, const unsigned short* __restrict__ w,
    const unsigned short* __restrict__ bias, unsigned short* __restrict__ y, int m, int n,
    int k, int act) {
    constexpr int WARPS = 8, R = TILES * G * 4;
    __shared__ float part[WARPS - 1][R][32];
    const int lane = threadIdx.x & 31, q = lane & 3, r = lane >> 2, warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * 8 * G;
    const int kv = k >> 3;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const uint4* wv[G];
#pragma unroll
    for (int g = 0; g < G; ++g)
        wv[g] = reinterpret_cast<const uint4*>(w) + (size_t)min(n0 + 8 * g + r, n - 1) * kv;
    const uint4* xr[2 * TILES];
    bool xok[2 * TILES];
#pragma unroll
    for (int t = 0; t < 2 * TILES; ++t) {
        xok[t] = r + 8 * t < m;
        xr[t] = xv + (size_t)min(r + 8 * t, m - 1) * kv;
    }
    float c[TILES][G][4];
#pragma unroll
    for (int t = 0; t < TILES; ++t)
#pragma unroll
        for (int g = 0; g < G; ++g) c[t][g][0] = c[t][g][1] = c[t][g][2] = c[t][g][3] = 0.f;
#pragma unroll 4
    for (int v = q + 4 * warp; v < kv; v += 4 * WARPS) {
        uint4 b[G], a[2 * TILES];
#pragma unroll
        for (int g = 0; g < G; ++g) b[g] = __ldcs(wv[g] + v);
#pragma unroll
        for (int t = 0; t < 2 * TILES; ++t)
            a[t] = xok[t] ? __ldg(xr[t] + v) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int t = 0; t < TILES; ++t)
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const uint4 &lo = a[2 * t], &hi = a[2 * t + 1];
                mma(c[t][g], lo.x, hi.x, lo.y, hi.y, b[g].x, b[g].y);
                mma(c[t][g], lo.z, hi.z, lo.w, hi.w, b[g].z, b[g].w);
            }
    }
    float* flat = &c[0][0][0];
    if (warp > 0) {
#pragma unroll
        for (int i = 0; i < R; ++i) part[warp - 1][i][lane] = flat[i];
    }
    __syncthreads();
    if (warp > 0) return;
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < WARPS - 1; ++j) flat[i] += part[j][i][lane];
#pragma unroll
    for (int t = 0; t < TILES; ++t)
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = 16 * t + r + 8 * h, col = n0 + 8 * g + 2 * q;
                if (row < m && col < n) {
                    const unsigned lo = to_bf16(epilog(c[t][g][2 * h], bias, col, act));
                    const unsigned hi = to_bf16(epilog(c[t][g][2 * h + 1], bias, col + 1, act));
                    *reinterpret_cast<unsigned*>(y + (size_t)row * n + col) = lo | (hi << 16);
                }
            }
}
"""


def kernel_names(tokens) -> dict:
    """``{label: (kernel name, output columns per warp, tensor cores)}`` for ``tokens`` rows."""
    names = {f"skinny COLS={c}": (f"skinny<{tokens}, {c}>", c, False) for c in COLS}
    if tokens <= 32:
        tiles = 1 if tokens <= 16 else 2
        names.update({f"skinny_tc G={g}": (f"skinny_tc<{tiles}, {g}>", 8 * g, True)
                      for g in GROUPS})
    return names


def compile_kernels(tokens, arch: str) -> dict:
    """``{label: (kernel, columns per warp, tensor cores)}`` of :func:`kernel_names` (one NVRTC
    run)."""
    from cuda.core import Program, ProgramOptions

    names = kernel_names(tokens)
    prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=arch, std="c++17"))
    module = prog.compile("cubin", name_expressions=[v[0] for v in names.values()])
    return {label: (module.get_kernel(name), cols, tc)
            for label, (name, cols, tc) in names.items()}


def _launcher(torch, kernel, cols, tc, x, weights, epilog, n, k):
    """A call of the kernel cycling through the weight copies, on torch's current stream;
    returns ``(call, out)`` (``out`` is written by every call). ``tc``: the tensor-core
    kernel (it takes the row count)."""
    import itertools

    import numpy as np
    from cuda.core import LaunchConfig, launch

    from cuweave._internal.memory import _core_stream

    out = torch.empty(x.shape[0], n, device="cuda", dtype=torch.bfloat16)
    # CUDA cores: one warp per `cols` columns; tensor cores: one block per `cols` columns
    groups = -(-n // cols)
    config = LaunchConfig(grid=groups if tc else -(-groups // WARPS), block=32 * WARPS)
    act = np.int32(ACT[epilog])
    # pointers as 8-byte NumPy scalars (cuda.core 1.2 refuses ctypes.c_void_p arguments)
    rows = (np.int32(x.shape[0]),) if tc else ()
    args = [(np.uint64(x.data_ptr()), np.uint64(w.data_ptr()),
             np.uint64(b.data_ptr() if b is not None else 0), np.uint64(out.data_ptr()),
             *rows, np.int32(n), np.int32(k), act) for w, b in weights]
    nxt = itertools.cycle(args).__next__
    # torch's current stream (its default one is handle 0: the legacy stream)
    stream = _core_stream(torch.cuda.current_stream().cuda_stream, torch.cuda.current_device())

    def call():
        launch(stream, config, kernel, *nxt())
        return out

    return call, out


def _split_k_variants(mm, top=2, splits=(2, 4, 8)) -> dict:
    """``{label: Algorithm}``: the ``top`` autotuned algorithms of ``mm`` with ``split_k`` set
    (where the algorithm supports it), each with the first reduction scheme it supports (in
    place, in the compute type, in the output type): what an autotune searching beyond
    cuBLASLt's heuristic list would try."""
    from cuweave._bindings.cublaslt import ReductionScheme
    from cuweave.linalg.advanced import Algorithm

    out = {}
    for rank, alg in enumerate(mm.algorithms[:top]):
        caps = alg.capabilities
        if not caps.get("SPLITK_SUPPORT"):
            continue
        mask = int(caps.get("REDUCTION_SCHEME_MASK", 0))
        scheme = next((r for r in (ReductionScheme.INPLACE, ReductionScheme.COMPUTE_TYPE,
                                   ReductionScheme.OUTPUT_TYPE) if mask & r), None)
        if scheme is None:
            continue
        for split in splits:
            v = Algorithm(alg.__getstate__()["data"])
            v.split_k, v.reduction_scheme = split, int(scheme)
            out[f"cuBLASLt #{rank} split_k={split} {scheme.name}"] = v
    return out


def _split_k_impls(torch, x, weights, epilog, mm, ref) -> dict:
    """Timed calls of every valid split-K variant (one planned Matmul per weight copy, as
    ``cases_llm._planned``), correctness-gated against ``ref``."""
    import cases_llm as llm

    impls = {}
    for label, alg in _split_k_variants(mm).items():
        try:
            mms = llm._planned(x, weights, epilog, tune=False, algorithms=[alg])[0]
            err = llm._rel_err(torch, mms[0].execute(), ref)
        except Exception as e:  # not valid for this problem
            print(f"   {label}: {type(e).__name__}: {str(e)[:160]}")
            continue
        print(f"   {label}: rel err {err:.1e}", flush=True)
        if err < 2e-2:
            nxt = llm._cycle(mms)
            impls[label] = lambda nxt=nxt: nxt().execute()
    return impls


def probe(res, torch, spec, arch: str) -> None:
    import cases_llm as llm

    model, layer, tokens, epilog = spec
    k, n = llm._dims(model, layer)
    case = llm.case_name(*spec)
    x, weights = llm._operands(torch, model, layer, tokens, epilog)
    timps = llm._torch_impls(torch, x, weights, epilog)
    ref = next(iter(timps.values()))()
    mms, _, _ = llm._planned(x, weights, epilog, tune=True)
    nxt_mm = llm._cycle(mms)
    impls = {"cuweave (cuBLASLt, autotuned)": lambda: nxt_mm().execute(), **timps}
    impls.update(_split_k_impls(torch, x, weights, epilog, mms[0], ref))
    for label, (kernel, cols, tc) in compile_kernels(tokens, arch).items():
        if tc and (k % 32 or n % 2):
            continue
        call, out = _launcher(torch, kernel, cols, tc, x, weights, epilog, n, k)
        out.fill_(float("nan"))
        call()  # the first weight copy, as ref
        torch.cuda.synchronize()
        err = llm._rel_err(torch, out, ref)
        print(f"   {case} {label}: rel err {err:.1e}", flush=True)
        if err < 2e-2:
            impls[label] = call
    del ref
    flops = llm._flops(tokens, k, n)
    times = gpu_times_interleaved(impls, iters=llm._iters(tokens, k, n), warmup=2, rounds=7)
    for name, ms in times.items():
        res.add(case=case, impl=name, metric="TFLOP/s", value=flops / (ms * 1e-3) / 1e12,
                unit="TFLOP/s", ms=ms, weight_tb_s=2.0 * n * k / (ms * 1e-3) / 1e12)
    torch_best = min((ms, name) for name, ms in times.items() if name in timps)[1]
    split = [name for name in times if name.startswith("cuBLASLt #")]
    if split:
        fastest = min(split, key=times.get)
        res.add(case=case, impl="cuBLASLt split-K (fastest)", metric="TFLOP/s",
                value=flops / (times[fastest] * 1e-3) / 1e12, unit="TFLOP/s", variant=fastest)
        res.add_ratio(case=case, metric="TFLOP/s", num="cuBLASLt split-K (fastest)",
                      den=torch_best, higher_is_better=True)
    skinny = [name for name in times if name.startswith("skinny")]
    if skinny:
        fastest = min(skinny, key=times.get)
        res.add(case=case, impl="skinny (fastest)", metric="TFLOP/s",
                value=flops / (times[fastest] * 1e-3) / 1e12, unit="TFLOP/s", variant=fastest)
        for den in (torch_best, "cuweave (cuBLASLt, autotuned)"):
            res.add_ratio(case=case, metric="TFLOP/s", num="skinny (fastest)", den=den,
                          higher_is_better=True)
    for mm in mms:
        mm.free()


def _cases(res, torch) -> None:
    import cases_llm as llm
    from cuda.core import Device

    Device(torch.cuda.current_device()).set_current()  # torch's context, current for cuda.core
    major, minor = torch.cuda.get_device_capability()
    for spec in llm.SUITE:
        if spec[2] > MAX_TOKENS:
            continue
        try:
            probe(res, torch, spec, f"sm_{major}{minor}")
        except Exception as e:  # reported; the other products still run
            print(f"   {llm.case_name(*spec)} failed: {type(e).__name__}: {str(e)[:500]}")


def main(argv=None) -> int:
    return probe_main(__doc__, "skinny_gemm_probe", _cases, argv)


if __name__ == "__main__":
    sys.exit(main())
