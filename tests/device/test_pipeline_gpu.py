"""GPU tests of cuBLASDx pipelines: nvmath-python's pipeline example kernels (2-D operands and
the 3-D batched ``reset_tile`` loop) run on the device and are compared with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ROW, COL = "row_major", "col_major"


def _mm(arrangement):
    from cuweave.device import Matmul
    from cuweave.device.cublasdx_backend import MAX_ALIGNMENT

    return Matmul(size=(128, 128, 32), precision=(np.float16, np.float16, np.float32),
                  data_type="real", arrangement=arrangement, alignment=MAX_ALIGNMENT,
                  execution="Block", block_size=128, with_pipeline=True,
                  enable_input_streaming=True)


def _kernel(mm, batched: bool):
    """The CPU tests' copy of nvmath's example kernel, compiled for launching."""
    from numba import cuda

    from cuweave.device.cublasdx_numba import pipeline_extensions
    from tests.device.test_pipeline import _example_kernel

    return cuda.jit(extensions=pipeline_extensions, launch_bounds=[mm.block_size, 1])(
        _example_kernel(mm, batched))


def _run(kernel, pipeline, grid, alpha, beta, c_d):
    """Launch as the examples do: the dynamic shared-memory limit raised to buffer_size."""
    from numba import cuda

    args = (alpha, beta, c_d, pipeline)
    # the overload the launch will pick: typed as numba.cuda types launch arguments
    compiled = kernel.compile(tuple(kernel.typeof_pyval(x) for x in args))
    _raise_dynamic_smem_limit(compiled.library.get_cufunc().handle, pipeline.buffer_size)
    kernel[grid, pipeline.block_dim, 0, pipeline.buffer_size](*args)
    cuda.synchronize()
    return c_d.copy_to_host()


def _raise_dynamic_smem_limit(handle, nbytes):
    """numba-cuda 0.30 launches a ``CUkernel`` (library kernel): its attributes are set with
    ``cuKernelSetAttribute`` per device; ``cuFuncSetAttribute`` on it does not reach launches."""
    from cuda.bindings import driver
    from numba import cuda

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if isinstance(handle, driver.CUkernel):
        err, = driver.cuKernelSetAttribute(attr, nbytes, handle, cuda.get_current_device().id)
    else:
        err, = driver.cuFuncSetAttribute(handle, attr, nbytes)
    assert err == driver.CUresult.CUDA_SUCCESS, err


def _rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("depth", [2, 0])
def test_pipeline_gemm_2d(depth):
    from numba import cuda

    rng = np.random.default_rng(7)
    m = n = 512
    k = 256
    mm = _mm((ROW, COL, ROW))
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = np.asfortranarray(rng.uniform(-1, 1, (k, n)).astype(np.float16))
    c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    a_d, b_d, c_d = cuda.to_device(a), cuda.to_device(b), cuda.to_device(c)
    pipeline = mm.suggest_device_pipeline(depth, a_d, b_d)
    assert tuple(pipeline.block_dim) == (128, 1, 1) and pipeline.buffer_size > 0
    out = _run(_kernel(mm, False), pipeline, (m // 128, n // 128, 1), 2.0, 3.0, c_d)
    ref = 2.0 * (a.astype(np.float64) @ b.astype(np.float64)) + 3.0 * c
    assert _rel(out, ref) < 1e-4


def test_pipeline_gemm_3d_reset_tile():
    from numba import cuda

    rng = np.random.default_rng(11)
    m = n = k = 256
    mm = _mm((COL, ROW, ROW))
    a = np.asfortranarray(rng.uniform(-1, 1, (m, k, 2)).astype(np.float16))
    b0 = rng.uniform(-1, 1, (2, k, n)).astype(np.float16)
    b = np.moveaxis(b0, 0, -1)
    c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    a_d, c_d = cuda.to_device(a), cuda.to_device(c)
    b_d = cuda.to_device(b0)
    b_d = cuda.cudadrv.devicearray.DeviceNDArray(b.shape, b.strides, b.dtype,
                                                 gpu_data=b_d.gpu_data)
    pipeline = mm.suggest_device_pipeline(2, a_d, b_d)
    out = _run(_kernel(mm, True), pipeline, (m // 128, n // 128, 1), 2.0, 3.0, c_d)
    total = sum(a[:, :, i].astype(np.float64) @ b[:, :, j].astype(np.float64)
                for i in range(2) for j in range(2))
    assert _rel(out, 2.0 * total + 3.0 * c) < 1e-4


def test_pipeline_rejects_mismatched_operands():
    from numba import cuda

    from cuweave._internal.errors import InvalidOperandError

    mm = _mm((ROW, COL, ROW))
    a_d = cuda.to_device(np.zeros((256, 64), np.float32))
    b_d = cuda.to_device(np.zeros((64, 256), np.float16))
    with pytest.raises(InvalidOperandError, match="a must hold float16 elements"):
        mm.suggest_device_pipeline(2, a_d, b_d)
