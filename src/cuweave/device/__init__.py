"""Device-side math inside numba ``@cuda.jit`` kernels: cuFFTDx and cuRAND (NVRTC), cuBLASDx
and cuSOLVERDx (libmathdx).

``import cuweave.device`` imports neither numba nor any CUDA library: numba is imported when an
:class:`FFT` is built, a vector type (``float32x2``, ...) or :mod:`~cuweave.device.random` is
first used; NVRTC when a configuration is compiled. Kernels may refer to an ``FFT`` object
directly (its traits are compile-time constants there) -- building it is all the registration.
"""

from __future__ import annotations

import importlib

from . import fft  # the module, callable as nvmath-python's fft(...) factory
from ._blas_options import Alignment, Arrangement, LeadingDimension, Precision, TransposeMode
from ._fft_legacy import FFTOptions
from ._options import ComplexLayout, Direction, Execution, FFTType, RealMode
from ._warm import warm_cache
from .common_cuda import CodeType, ComputeCapability, Dim3, current_device_lto, current_device_sm
from .fft import FFT, valid_sizes
from .matmul import (
    MAX_ALIGNMENT,
    Layout,
    Matmul,
    SharedStorageCalc,
    get_current_device_cc,
    matmul,
)

_VECTOR_NAMES = ("float16x2", "float16x4", "float32x2", "float32x4", "float64x2", "float64x4",
                 "uint32x4")
_LAZY = {
    **{n: "._vector_types" for n in _VECTOR_NAMES},
    **{f"{n}_type": "._vector_types" for n in _VECTOR_NAMES},
    **{n: "._blas_numba" for n in ("make_tensor", "copy", "copy_fragment", "clear", "axpby",
                                    "copy_wait", "OpaqueTensorType")},
    **{n: "._blas_fragments" for n in ("make_fragment_like", "AccumulatorType")},
    **{n: "._streaming" for n in ("ldcs", "stcs")},  # streaming complex/vector accesses
    # cuSOLVERDx device solvers (nvmath.device's names; no library is loaded until one is built)
    **{n: ".cusolverdx" for n in ("Solver", "CholeskySolver", "LUSolver", "LUPivotSolver",
                                   "TriangularSolver", "QRFactorize", "LQFactorize",
                                   "QRMultiply", "LQMultiply", "LeastSquaresSolver",
                                   "compile_solver_execute")},
    "OpaqueTensor": "._blas_numba",   # nvmath-python's names of the numba types
    "Accumulator": "._blas_fragments",
    "DevicePipeline": "._blas_pipeline",
    "TilePipeline": "._blas_pipeline",
    **{n: ".types" for n in ("complex32", "complex64", "complex128", "half2", "half4",
                             "np_float16x2", "np_float16x4")},
}
_ALIASES = {"OpaqueTensor": "OpaqueTensorType", "Accumulator": "AccumulatorType"}
#: modules loaded together: fragment element access, make_fragment_like and accumulators
#: register their numba overloads with the tensor ones
_WITH = {"._blas_numba": "._blas_fragments"}
_SUBMODULES = ("types", "random", "random_helpers", "common_cuda", "common", "cublasdx",
               "cublasdx_backend", "cublasdx_numba", "cusolverdx")

__all__ = [
    "FFT",
    "fft",
    "FFTOptions",
    "CodeType",
    "current_device_lto",
    "Matmul",
    "matmul",
    "Layout",
    "SharedStorageCalc",
    "MAX_ALIGNMENT",
    "get_current_device_cc",
    "Alignment",
    "Arrangement",
    "LeadingDimension",
    "Precision",
    "TransposeMode",
    "Dim3",
    "ComputeCapability",
    "current_device_sm",
    "valid_sizes",
    "warm_cache",
    "FFTType",
    "Direction",
    "Execution",
    "ComplexLayout",
    "RealMode",
    *_LAZY,
]


def __getattr__(name):
    if name in _LAZY:
        try:
            module = importlib.import_module(_LAZY[name], __name__)
            if _LAZY[name] in _WITH:
                importlib.import_module(_WITH[_LAZY[name]], __name__)
        except ImportError as e:  # the vector types are numba types
            from .._internal.errors import LibraryNotFoundError

            raise LibraryNotFoundError("numba-cuda", "dx", f"{name} needs it: {e}") from e
        value = getattr(module, _ALIASES.get(name, name))
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
