"""nvmath-python's binding error classes under cuweave.bindings: an nvmath program's
``except nvmath.bindings.cublasLt.cuBLASLtError`` catches cuweave's failures once renamed."""

from __future__ import annotations

import pytest

from cuweave._internal.errors import CublasLtError, CufftError, LibraryError


def test_cublaslt_error_class_catches_cuweave_cublaslt_failures():
    from cuweave.bindings import cublasLt

    with pytest.raises(cublasLt.cuBLASLtError) as info:
        raise CublasLtError(15, "cublasLtMatmulAlgoGetHeuristic")
    assert info.value.status == 15 and "CUBLAS_STATUS_NOT_SUPPORTED" in str(info.value)
    assert issubclass(cublasLt.cuBLASLtError, LibraryError)


def test_cufft_error_class_catches_cuweave_cufft_failures():
    from cuweave.bindings import cufft

    with pytest.raises(cufft.cuFFTError):
        raise CufftError(5, "cufftMakePlanMany64")
    assert not issubclass(cufft.cuFFTError, CublasLtError)


def test_heuristic_result_dtype_is_the_c_structure():
    import ctypes

    from cuweave._bindings import cublaslt as lt
    from cuweave.bindings import cublasLt

    assert cublasLt.matmul_heuristic_result_dtype.itemsize == ctypes.sizeof(lt.HeuristicResult)
