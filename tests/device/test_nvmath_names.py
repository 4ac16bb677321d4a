"""nvmath-python's module layout and earlier spellings under cuweave.device (CPU only): the
``fft(...)`` factory (``cuweave.device.fft`` is callable), ``FFTOptions``, ``FFT.files``,
``current_device_lto``/``CodeType``, and the ``common``, ``cublasdx``, ``cublasdx_backend``
and ``common_cuda`` modules that nvmath's example programs import from."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import cuweave.device as dx
from cuweave._internal.errors import CudaUnavailableError, InvalidOptionError

SM90 = dx.CodeType("lto", dx.ComputeCapability(9, 0))


def test_submodules_import_without_numba():
    code = ("import sys, cuweave.device.common, cuweave.device.cublasdx, "
            "cuweave.device.cublasdx_backend, cuweave.device.common_cuda\n"
            "import cuweave.device as dx\n"
            "assert callable(dx.fft) and dx.fft.FFT is dx.FFT\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_module_names_are_the_same_objects():
    from cuweave.device import common, common_cuda, cublasdx, cublasdx_backend

    assert cublasdx.Matmul is dx.Matmul and cublasdx.matmul is dx.matmul
    assert cublasdx.SharedStorageCalc is dx.SharedStorageCalc
    assert cublasdx.MAX_ALIGNMENT == cublasdx_backend.MAX_ALIGNMENT == (16, 16, 16)
    assert cublasdx_backend.Arrangement is dx.Arrangement
    assert common.Layout is dx.Layout
    assert common_cuda.Dim3 is dx.Dim3 and common_cuda.CodeType is dx.CodeType
    with pytest.raises(AttributeError):
        common.no_such_name  # noqa: B018


def test_current_device_helpers_raise_typed_errors_without_a_gpu():
    from cuweave._internal import cuda

    if cuda.is_available():
        pytest.skip("a GPU is present")
    from cuweave.device.common_cuda import get_current_device_cc

    with pytest.raises(CudaUnavailableError):
        get_current_device_cc()
    with pytest.raises(CudaUnavailableError):
        dx.current_device_lto()


@pytest.fixture(scope="module")
def compiler():
    pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (the 'dx' extra) is not installed")
    from cuweave._internal.errors import LibraryNotFoundError
    from cuweave.device import _codegen

    try:
        _codegen.toolchain_versions()
        _codegen.cccl_include()
    except LibraryNotFoundError as e:
        pytest.skip(f"optional package missing: {e}")


def test_fft_factory(compiler):
    f = dx.fft(fft_type="c2c", size=64, precision=np.float32, direction="forward",
               execution="Block", compiler="numba", code_type=SM90)
    assert isinstance(f, dx.FFT) and f.sm == 900 and f.size == 64
    assert f.files == []
    assert dx.fft(fft_type="c2c", size=64, precision=np.float32, sm=90).sm == 900
    with pytest.raises(InvalidOptionError, match="compiler must be None or 'numba', got 'nvcc'"):
        dx.fft(fft_type="c2c", size=64, compiler="nvcc", sm=90)
    with pytest.raises(InvalidOptionError, match="execute_api must be one of"):
        dx.fft(fft_type="c2c", size=64, execute_api="tensors", sm=90)


def test_fft_options_valid_then_create(compiler):
    base = dx.FFTOptions(fft_type="c2c", size=64, precision=np.float32, direction="forward",
                         execution="Block", code_type=SM90)
    assert base.size == 64 and base.code_type is SM90
    pairs = base.valid("elements_per_thread", "ffts_per_block")
    ept, fpb = pairs[0]
    f = base.create(elements_per_thread=ept, ffts_per_block=fpb, compiler="numba")
    assert (f.elements_per_thread, f.ffts_per_block, f.sm) == (ept, fpb, 900)
    with pytest.raises(InvalidOptionError, match="size"):
        dx.FFTOptions(fft_type="c2c", size=67, precision=np.float32, execution="Block",
                      code_type=SM90)


def test_matmul_factory_knobs_of_nvmath():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from cuweave._internal.errors import LibraryNotFoundError
    from cuweave.device import _blas_mathdx

    try:
        _blas_mathdx.versions()
    except LibraryNotFoundError as e:
        pytest.skip(f"libmathdx is not available: {e}")
    knobs = dict(size=(32, 32, 32), precision=np.float32, data_type="real", block_size=64,
                 arrangement=("row_major", "col_major", "col_major"))
    mm = dx.matmul(**knobs, compiler="numba", code_type=SM90,
                   execute_api="dynamic_leading_dimensions", global_memory_alignment=(16, 16, 8))
    assert mm.sm[:2] == (9, 0) and tuple(mm.block_dim) == (64, 1, 1)  # no traits compilation
    assert mm.files == []  # nvmath's kernels pass link=MM.files: our functions link themselves
    with pytest.raises(InvalidOptionError, match="global_memory_alignment must be three powers"):
        dx.matmul(**knobs, sm=90, global_memory_alignment=(16, 12, 8))
    with pytest.raises(InvalidOptionError, match="execute_api must be one of"):
        dx.matmul(**knobs, sm=90, execute_api="pointers")
    from cuweave.device._blas_fragments import AccumulatorType
    from cuweave.device._blas_numba import OpaqueTensorType

    assert dx.OpaqueTensor is OpaqueTensorType and dx.Accumulator is AccumulatorType
