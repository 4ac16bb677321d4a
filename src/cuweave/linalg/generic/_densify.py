"""The dense form of a structured operand on the GPU, in one pass (an NVRTC kernel), and the
pointer arrays of batched routines written on the device.

``MatmulOptions(structured="dense")`` (EXT) computes a triangular, symmetric or Hermitian
product as a GEMM on the operand's dense form instead of cuBLAS trmm/symm/hemm: this kernel
writes the full matrix from the triangle holding the data (the other triangle zeroed,
mirrored, or mirrored and conjugated; a unit diagonal set; a Hermitian diagonal's imaginary
part dropped), reading both 32 x 32 tiles of a pair through shared memory so every global
access is coalesced. Compiled once per process and device (NVRTC through cuda.core), launched
on the run's stream.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["SOURCE", "MODES", "launch", "densify_host", "launch_pointers"]

#: what the other triangle becomes: zeros, zeros with a unit diagonal, the mirror, the
#: conjugated mirror (real diagonal)
MODES = {"tr": 0, "tr_unit": 1, "sy": 2, "he": 3}

SOURCE = r"""
struct c64 { float x, y; };
struct c128 { double x, y; };
template <typename T> __device__ inline T zero_of() { return T(0); }
template <> __device__ inline c64 zero_of<c64>() { return c64{0.f, 0.f}; }
template <> __device__ inline c128 zero_of<c128>() { return c128{0.0, 0.0}; }
template <typename T> __device__ inline T one_of() { return T(1); }
template <> __device__ inline c64 one_of<c64>() { return c64{1.f, 0.f}; }
template <> __device__ inline c128 one_of<c128>() { return c128{1.0, 0.0}; }
template <typename T> __device__ inline T conj_of(T v) { return v; }
template <> __device__ inline c64 conj_of<c64>(c64 v) { return c64{v.x, -v.y}; }
template <> __device__ inline c128 conj_of<c128>(c128 v) { return c128{v.x, -v.y}; }
template <typename T> __device__ inline T real_of(T v) { return v; }
template <> __device__ inline c64 real_of<c64>(c64 v) { return c64{v.x, 0.f}; }
template <> __device__ inline c128 real_of<c128>(c128 v) { return c128{v.x, 0.0}; }

// out (n x n, column-major, leading dimension ldo) = the dense form of the column-major
// matrix a (leading dimension lda) whose triangle `lower` holds the data; batch z at
// a + z * sa, out + z * so. Blocks of 32 x 8 threads, one 32 x 32 output tile each.
template <typename T>
__device__ void densify(const T* __restrict__ a, long long lda, long long sa,
                        T* __restrict__ out, long long ldo, long long so, int n, int mode,
                        int lower) {
    __shared__ T tile[32][33];
    __shared__ T mirror[32][33];
    a += blockIdx.z * sa;
    out += blockIdx.z * so;
    const int I = blockIdx.x * 32, J = blockIdx.y * 32, tx = threadIdx.x;
    for (int k = threadIdx.y; k < 32; k += 8) {
        int i = I + tx, j = J + k;
        if (i < n && j < n) tile[k][tx] = a[i + (long long)j * lda];
        if (mode >= 2) {
            int mi = J + tx, mj = I + k;
            if (mi < n && mj < n) mirror[k][tx] = a[mi + (long long)mj * lda];
        }
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += 8) {
        int i = I + tx, j = J + k;
        if (i >= n || j >= n) continue;
        bool inside = lower ? (i >= j) : (i <= j);
        T v;
        if (inside) {
            v = tile[k][tx];
        } else if (mode >= 2) {
            v = mirror[tx][k];
            if (mode == 3) v = conj_of<T>(v);
        } else {
            v = zero_of<T>();
        }
        if (i == j) {
            if (mode == 1) v = one_of<T>();
            if (mode == 3) v = real_of<T>(v);
        }
        out[i + (long long)j * ldo] = v;
    }
}

#define DEFINE(name, T)                                                                   \
extern "C" __global__ void __launch_bounds__(256) name(                                 \
        const T* a, long long lda, long long sa, T* out, long long ldo, long long so,     \
        int n, int mode, int lower) {                                                     \
    densify<T>(a, lda, sa, out, ldo, so, n, mode, lower);                                 \
}
DEFINE(densify_float32, float)
DEFINE(densify_float64, double)
DEFINE(densify_complex64, c64)
DEFINE(densify_complex128, c128)

// the addresses of a batch with a uniform stride (a batched routine's pointer array), written
// on the device: no host copy, nothing for the stream to wait for
extern "C" __global__ void batch_pointers(unsigned long long* out, unsigned long long base,
                                          long long step, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[i] = base + (unsigned long long)(i * step);
}
"""

_lock = threading.Lock()
_kernels: dict = {}


def _kernel(device_id: int, dtype: str):
    key = (device_id, dtype)
    k = _kernels.get(key)
    if k is not None:
        return k
    with _lock:
        if key not in _kernels:
            from cuda.core import Program, ProgramOptions

            from ..._internal import cuda

            dev = cuda.core_device(device_id)
            major, minor = cuda.compute_capability(device_id)
            prog = Program(SOURCE, code_type="c++",
                           options=ProgramOptions(arch=f"sm_{major}{minor}", std="c++17"))
            module = prog.compile("cubin")
            del dev
            for dt in ("float32", "float64", "complex64", "complex128"):
                _kernels[(device_id, dt)] = module.get_kernel(f"densify_{dt}")
            _kernels[(device_id, "pointers")] = module.get_kernel("batch_pointers")
    return _kernels[key]


def launch_pointers(device_id, stream, out, base, step_bytes, count) -> None:
    """Queue ``out[i] = base + i * step_bytes`` for ``i < count`` (device memory)."""
    from cuda.core import LaunchConfig, Stream
    from cuda.core import launch as core_launch

    from ..._internal import cuda

    kernel = _kernel(device_id, "pointers")
    s = Stream.from_handle(stream) if stream else cuda.core_device(device_id).default_stream
    config = LaunchConfig(grid=((count + 255) // 256, 1, 1), block=(256, 1, 1))
    core_launch(s, config, kernel, np.uint64(out), np.uint64(base), np.int64(step_bytes),
                np.int32(count))


def launch(dtype, device_id, stream, a, lda, sa, out, ldo, so, n, mode, lower, count=1):
    """Queue the dense form of ``count`` matrices (strides ``sa`` / ``so`` elements)."""
    from cuda.core import LaunchConfig, Stream
    from cuda.core import launch as core_launch

    from ..._internal import cuda

    kernel = _kernel(device_id, dtype)
    tiles = (n + 31) // 32
    config = LaunchConfig(grid=(tiles, tiles, count), block=(32, 8, 1))
    s = Stream.from_handle(stream) if stream else cuda.core_device(device_id).default_stream
    core_launch(s, config, kernel, np.uint64(a), np.int64(lda), np.int64(sa), np.uint64(out),
                np.int64(ldo), np.int64(so), np.int32(n), np.int32(mode), np.int32(lower))


def densify_host(x: np.ndarray, mode: int, lower: bool) -> np.ndarray:
    """What the kernel computes, in NumPy (the CPU backend's and the tests' version): the
    dense form of the square matrix ``x`` (its memory matrix)."""
    tri = np.tril(x) if lower else np.triu(x)
    if mode <= 1:
        out = tri.copy()
        if mode == 1:
            np.fill_diagonal(out, 1)
        return out
    strict = np.tril(x, -1) if lower else np.triu(x, 1)
    mirror = strict.T.conj() if mode == 3 else strict.T
    out = tri + mirror
    if mode == 3:
        idx = np.arange(x.shape[0])
        out[idx, idx] = out[idx, idx].real
    return out
