"""What this machine offers cuweave: GPUs, driver, libraries, array packages, execution spaces.

Every probe is guarded: on a machine without CUDA each entry says plainly what is missing.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import platform
import sys

from ._internal import cuda

__all__ = ["collect", "is_available", "format_info"]

_PACKAGES = ("numpy", "scipy", "threadpoolctl", "cuda-bindings", "cuda-core", "cuda-pathfinder",
             "numba", "numba-cuda", "nvidia-mathdx", "torch", "cupy-cuda13x", "cupy-cuda12x",
             "ml_dtypes", "nvmath-python")


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _library(name: str, version_fn: str | None):
    from ._bindings._loader import library_path, load_library

    try:
        lib = load_library(name)
    except Exception as e:
        return {"available": False, "error": str(e)}
    entry = {"available": True, "path": library_path(name)}
    if version_fn:
        try:
            fn = getattr(lib, version_fn)
            if name == "cufft":
                v = ctypes.c_int()
                fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
                fn(ctypes.byref(v))
                entry["version"] = v.value
            elif name == "nvrtc":
                major, minor = ctypes.c_int(), ctypes.c_int()
                fn(ctypes.byref(major), ctypes.byref(minor))
                entry["version"] = f"{major.value}.{minor.value}"
            elif name == "cudart":
                v = ctypes.c_int()
                fn(ctypes.byref(v))
                entry["version"] = v.value
            else:
                fn.restype = ctypes.c_size_t
                entry["version"] = int(fn())
        except Exception as e:  # pragma: no cover - depends on the library build
            entry["version_error"] = str(e)
    return entry


def _gpus() -> list[dict]:
    out = []
    for i in range(cuda.device_count()):
        out.append({
            "id": i,
            "name": cuda.device_name(i),
            "compute_capability": ".".join(map(str, cuda.compute_capability(i))),
            "multiprocessors": cuda.multiprocessor_count(i),
            "memory_bytes": cuda.total_memory(i),
        })
    return out


def collect() -> dict:
    """Probe everything (never raises) and return a JSON-able dict."""
    from ._version import __version__

    d: dict = {
        "cuweave": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: v for p in _PACKAGES if (v := _version(p))},
    }
    cuda_ok = cuda.is_available()
    d["cuda"] = {"usable": cuda_ok}
    if cuda_ok:
        v = cuda.driver_version()
        d["cuda"]["driver_version"] = f"{v // 1000}.{(v % 1000) // 10}"
        d["gpus"] = _gpus()
    else:
        d["cuda"]["reason"] = cuda.unavailable_reason()
        d["gpus"] = []
    d["libraries"] = {
        "cudart": _library("cudart", "cudaRuntimeGetVersion"),
        "cublasLt": _library("cublasLt", "cublasLtGetVersion"),
        "cufft": _library("cufft", "cufftGetVersion"),
        "nvrtc": _library("nvrtc", "nvrtcVersion"),
        "nvJitLink": _library("nvJitLink", None),
    }
    libs = d["libraries"]
    numba_cuda = "numba-cuda" in d["packages"]
    mathdx = "nvidia-mathdx" in d["packages"]
    d["execution_spaces"] = {
        "cpu": True,
        "cuda.linalg": cuda_ok and libs["cublasLt"]["available"],
        "cuda.fft": cuda_ok and libs["cufft"]["available"],
        "cuda.fft_callbacks": cuda_ok and libs["cufft"]["available"] and numba_cuda,
        "cuda.device": cuda_ok and numba_cuda and mathdx and libs["nvrtc"]["available"],
    }
    return d


def is_available() -> bool:
    """A usable CUDA device, and cuBLASLt and cuFFT can be loaded."""
    if not cuda.is_available():
        return False
    from ._bindings._loader import load_library

    try:
        load_library("cublasLt")
        load_library("cufft")
    except Exception:
        return False
    return True


def format_info(d: dict) -> str:
    """Human-readable rendering of :func:`collect`'s result."""
    lines = [f"cuweave {d['cuweave']}  (Python {d['python']}, {d['platform']})", ""]
    if d["cuda"]["usable"]:
        lines.append(f"CUDA driver {d['cuda']['driver_version']}")
        for g in d["gpus"]:
            lines.append(f"  GPU {g['id']}: {g['name']}, compute capability "
                         f"{g['compute_capability']}, {g['multiprocessors']} SMs, "
                         f"{g['memory_bytes'] / 2**30:.1f} GiB")
    else:
        lines.append(f"CUDA: not usable — {d['cuda']['reason']}")
    lines.append("")
    lines.append("Libraries:")
    for name, e in d["libraries"].items():
        if e["available"]:
            ver = f" version {e['version']}" if "version" in e else ""
            lines.append(f"  {name:10s} found{ver}  ({e['path']})")
        else:
            lines.append(f"  {name:10s} missing — {e['error']}")
    lines.append("")
    lines.append("Array packages and tools: " + ", ".join(
        f"{k} {v}" for k, v in d["packages"].items()))
    lines.append("")
    lines.append("Execution spaces:")
    for k, v in d["execution_spaces"].items():
        lines.append(f"  {k:20s} {'yes' if v else 'no'}")
    return "\n".join(lines)
