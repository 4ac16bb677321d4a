"""What this machine offers cuweave: GPUs, driver, libraries, array packages, execution spaces.

Every probe is guarded: on a machine without CUDA each entry says plainly what is missing.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import os
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


def _blas() -> list[dict]:
    """The BLAS libraries NumPy (and so the CPU matmul) calls, with their thread counts."""
    try:
        import numpy  # noqa: F401  (threadpoolctl sees only the libraries already loaded)
        from threadpoolctl import threadpool_info
    except Exception as e:  # pragma: no cover - numpy and threadpoolctl are core dependencies
        return [{"error": str(e)}]
    return [{"library": i.get("internal_api"), "version": i.get("version"),
             "threads": i.get("num_threads"), "path": i.get("filepath")}
            for i in threadpool_info() if i.get("user_api") == "blas"]


def _cpu_fft(cuda_ok: bool) -> dict:
    """The CPU FFT library, its threads, and what the ``scipy.fft`` backend does with NumPy."""
    from ._internal.options import ExecutionCPU

    entry: dict = {"threads": ExecutionCPU().threads}
    try:
        from .fft import _cpu_backends, scipy_backend

        entry["library"] = _cpu_backends.backend_name()
    except Exception as e:  # CUWEAVE_CPU_FFT=mkl without MKL, say
        return {**entry, "library": None, "error": str(e)}
    if entry["library"] == "pocketfft":
        x86 = platform.machine().lower() in ("x86_64", "amd64")
        entry["mkl"] = ("not installed (pip install 'cuweave[cpu-fft]' for MKL's FFTs)" if x86
                        else f"not available for {platform.machine()} (pocketfft serves)")
    threshold = scipy_backend.numpy_gpu_min_elements
    if cuda_ok and threshold is not None:
        entry["scipy_backend_numpy"] = (
            f"NumPy arrays of >= {threshold} elements run on the GPU when SciPy would use one "
            "thread; smaller ones run on SciPy's own CPU FFT")
    else:
        why = "no usable GPU" if not cuda_ok else "numpy_gpu_min_elements is None"
        entry["scipy_backend_numpy"] = (
            f"not served ({why}): scipy.fft runs NumPy arrays on SciPy's own pocketfft")
    return entry


def collect() -> dict:
    """Probe everything (never raises) and return a JSON-able dict.

    Returns
    -------
    dict
        ``cuweave``, ``python``, ``platform``, ``packages`` (installed versions), ``cuda``
        (usable, driver or the reason it is not usable), ``gpus``, ``libraries`` (CUDA
        libraries found, their versions and paths), ``cpu`` (cores, the BLAS libraries and
        their threads, the CPU FFT library and its threads, and whether the ``scipy.fft``
        backend serves NumPy arrays here) and ``execution_spaces``.
    """
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
    d["cpu"] = {"cores": os.cpu_count(), "blas": _blas(), "fft": _cpu_fft(cuda_ok)}
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


def _format_cpu(cpu: dict) -> list[str]:
    lines = [f"CPU ({cpu['cores']} cores):"]
    for b in cpu["blas"] or [{"error": "no BLAS library loaded by NumPy was found"}]:
        if "error" in b:
            lines.append(f"  BLAS (matmul)  unknown — {b['error']}")
        else:
            lines.append(f"  BLAS (matmul)  {b['library']} {b['version']}, {b['threads']} "
                         f"threads  ({b['path']})")
    f = cpu["fft"]
    if f.get("library") is None:
        lines.append(f"  FFT            unknown — {f.get('error')}")
    else:
        name = {"mkl": "MKL DFTI", "pocketfft": "pocketfft (SciPy's)"}.get(f["library"],
                                                                            f["library"])
        lines.append(f"  FFT            {name}, {f['threads']} threads"
                     + (f"; MKL {f['mkl']}" if "mkl" in f else ""))
        lines.append(f"  scipy.fft backend  {f['scipy_backend_numpy']}")
    return lines


def format_info(d: dict) -> str:
    """Human-readable rendering of :func:`collect`'s result.

    Parameters
    ----------
    d : dict
        What :func:`collect` returned.

    Returns
    -------
    str
        Several lines of text, one section per subject.
    """
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
    lines.extend(_format_cpu(d["cpu"]))
    lines.append("")
    lines.append("Array packages and tools: " + ", ".join(
        f"{k} {v}" for k, v in d["packages"].items()))
    lines.append("")
    lines.append("Execution spaces:")
    for k, v in d["execution_spaces"].items():
        lines.append(f"  {k:20s} {'yes' if v else 'no'}")
    return "\n".join(lines)
