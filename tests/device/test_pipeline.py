"""CPU tests of cuBLASDx pipelines (``Matmul(with_pipeline=True)``, ``DevicePipeline``): knob
validation, the names nvmath-python's examples import, pipeline traits from libmathdx, and
nvmath's pipeline example kernels typed by numba and linked for sm_90 by nvJitLink (no GPU).

The library-backed tests are skipped without nvidia-libmathdx-cu13 / numba-cuda / nvJitLink.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError, InvalidOptionError
from cuweave.device._blas_options import MatmulSpec
from tests.device._prefill import in_a_fresh_process, pipeline_traits
from tests.device.test_matmul import link_sm90, mathdx  # noqa: F401 - fixtures

ROW, COL = "row_major", "col_major"
TILE = (128, 128, 32)
PRECISION = (np.float16, np.float16, np.float32)


def _knobs(**kw):
    base = dict(size=TILE, precision=PRECISION, data_type="real", arrangement=(ROW, COL, ROW),
                alignment=(16, 16, 16), sm=90, block_size=128, with_pipeline=True,
                enable_input_streaming=True)
    base.update(kw)
    return base


# ---------------------------------------------------------------------------------------------
# Pure Python
# ---------------------------------------------------------------------------------------------


def test_pipeline_knobs_are_part_of_the_spec():
    s = MatmulSpec.from_knobs(**_knobs())
    assert s.with_pipeline and s.enable_input_streaming
    plain = MatmulSpec.from_knobs(**_knobs(with_pipeline=False, enable_input_streaming=False))
    assert s.key() != plain.key()
    assert len(plain.key()) == 13          # unpipelined keys (and their disk cache) unchanged


@pytest.mark.parametrize("kw, fragment", [
    (dict(with_pipeline="yes"), "with_pipeline must be a bool, got 'yes'"),
    (dict(enable_input_streaming=1), "enable_input_streaming must be a bool, got 1"),
])
def test_pipeline_knobs_validated(kw, fragment):
    with pytest.raises(InvalidOptionError) as info:
        MatmulSpec.from_knobs(**_knobs(**kw))
    assert fragment in str(info.value)


def test_names_the_examples_import():
    from cuweave.bindings import mathdx as bindings_mathdx
    from cuweave.device import cublasdx, cublasdx_backend

    assert cublasdx.MAX_ALIGNMENT == cublasdx_backend.MAX_ALIGNMENT == (16, 16, 16)
    assert cublasdx.BlasOptionsComplete is cublasdx.Matmul
    assert cublasdx.DevicePipeline.__name__ == "DevicePipeline"
    assert callable(bindings_mathdx.get_version_ex)


def test_import_cuweave_bindings_imports_no_array_package():
    code = ("import sys, cuweave, cuweave.bindings, cuweave.device.cublasdx;"
            "bad = [m for m in ('numba', 'torch', 'cupy') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_device_pipeline_validates_before_any_gpu_work():
    from cuweave.device import _blas_pipeline as bp

    with pytest.raises(InvalidOptionError, match="pipeline_depth must be an integer"):
        bp._check_depth(17)
    with pytest.raises(InvalidOptionError, match="pipeline_depth must be an integer"):
        bp._check_depth(True)
    with pytest.raises(InvalidOperandError, match="__cuda_array_interface__"):
        bp._array_info(np.zeros((4, 4)), "a")

    class Fake:
        __cuda_array_interface__ = {"shape": (256, 64), "typestr": "<f2", "strides": None,
                                    "data": (1 << 20, False), "version": 3}

    assert bp._array_info(Fake(), "a") == (np.dtype(np.float16), (256, 64), (64, 1), 1 << 20)

    class NotPipelined:
        with_pipeline = False

    with pytest.raises(InvalidOptionError, match="with_pipeline=True"):
        bp.DevicePipeline(NotPipelined(), 2, Fake(), Fake())


# ---------------------------------------------------------------------------------------------
# libmathdx-backed (CPU)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mm_pipe(mathdx):  # noqa: F811 - fixture
    from cuweave.device import Matmul

    return Matmul(**_knobs())


def test_get_version_ex(mathdx):  # noqa: F811 - fixture
    from cuweave.bindings import mathdx as bindings_mathdx

    v = bindings_mathdx.get_version_ex()
    assert isinstance(v, tuple) and len(v) == 3 and v >= (0, 3, 0)
    assert bindings_mathdx.get_version() == mathdx.versions()["libmathdx"]


def _info(mm, shape_a, strides_a, shape_b, strides_b, depth=2, knobs=None):
    from cuweave.device import _blas_pipeline as bp

    a, b = ("float16", shape_a, strides_a), ("float16", shape_b, strides_b)
    config = bp.PipelineConfig(mm._resolved, depth, a, b)
    if knobs is not None:  # libmathdx's compilation (1.5 GB) in a fresh process, for the cache
        in_a_fresh_process(pipeline_traits, knobs, depth, a, b)
    return bp.PipelineInfo(mm, config, bp.pipeline_traits(mm._resolved, config))


def test_pipeline_traits(mm_pipe):
    m = n = k = 1024
    info = _info(mm_pipe, (m, k), (k, 1), (k, n), (1, k), knobs=_knobs())
    dev, tile = info.traits["device"], info.traits["tile"]
    assert dev["block_dim"] == [128, 1, 1]
    stage = (128 * 32 + 32 * 128) * 2
    assert 2 * stage <= dev["buffer_size"] <= 2 * stage + 1024
    assert dev["buffer_alignment"] >= 16 and dev["storage_bytes"] >= 128
    assert tile["storage_bytes"] > 0 and tile["storage_alignment"] > 0
    assert mm_pipe.with_pipeline and mm_pipe.enable_input_streaming


def _example_kernel(mm, batched: bool):
    """nvmath-python's pipeline example kernels (2-D and 3-D operands)."""
    from numba import cuda

    from cuweave.device import axpby, make_tensor

    tile_m, tile_n = mm.size[:2]

    def kernel(alpha, beta, c, device_pipeline):
        smem = cuda.shared.array(shape=(0,), dtype=np.byte,
                                 alignment=device_pipeline.buffer_alignment)
        bx, by = cuda.blockIdx.x, cuda.blockIdx.y
        c_tile = c[bx * tile_m:(bx + 1) * tile_m, by * tile_n:(by + 1) * tile_n]
        gmem_c = make_tensor(c_tile, mm.get_layout_gmem_c())
        if batched:
            tile_pipeline = device_pipeline.get_tile(smem, (bx, np.int32(0)), (by, np.int32(0)))
        else:
            tile_pipeline = device_pipeline.get_tile(smem, bx, by)
        accumulator = mm.suggest_accumulator()
        tile_pipeline.execute(accumulator)
        if batched:
            for step in range(1, 4):
                device_pipeline.reset_tile(tile_pipeline, (bx, np.int32(step % 2)),
                                           (by, np.int32(step // 2)))
                tile_pipeline.execute(accumulator)
        if accumulator.is_thread_active():
            d_frag = accumulator.make_partition_and_copy(gmem_c)
            axpby(alpha, accumulator.get_results(), beta, d_frag)
            accumulator.partition_and_copy(d_frag, gmem_c)
        tile_pipeline._del()

    return kernel


@pytest.mark.slow
@pytest.mark.parametrize("batched", [False, True], ids=["2d", "3d"])
def test_example_kernels_link_for_sm90(mm_pipe, link_sm90, batched):  # noqa: F811 - fixture
    from numba.cuda import types

    from cuweave.device import _blas_pipeline as bp
    from cuweave.device.cublasdx_numba import DevicePipelineType

    m = n = k = 1024
    if batched:   # the 3-D example: a (m, k, 2) F-ordered, b (k, n, 2) = moveaxis(C (2, k, n))
        from cuweave.device import Matmul

        mm_pipe = Matmul(**_knobs(arrangement=(COL, ROW, ROW)))
        info = _info(mm_pipe, (m, k, 2), (1, m, m * k), (k, n, 2), (n, 1, k * n))
    else:
        info = _info(mm_pipe, (m, k), (k, 1), (k, n), (1, k))
    sig = (types.float64, types.float64, types.float32[:, ::1], DevicePipelineType(info))
    ptx, symbols = link_sm90(_example_kernel(mm_pipe, batched), sig, ptx=True)
    text = ptx.decode(errors="replace")
    assert ".entry" in text
    names = info.code()["symbols"]
    # everything inlined: no call of a generated function survives the link
    assert names["tile_execute"] not in text and "call.uni" not in text.split(".entry")[1]
    # the two host kernels (create / destroy the device object) link too
    code = info.code()
    cubin = bp.link_cubin([code["shims"], code["functions"]], "sm_90a")
    assert cubin[:4] == b"\x7fELF"
