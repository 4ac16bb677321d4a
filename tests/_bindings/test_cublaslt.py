"""cuBLASLt bindings: enum values (CPU) and live calls (GPU)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from cuweave._bindings import cublaslt as lt


def test_enum_values_match_cuda13_header():
    assert lt.Epilogue.RELU_AUX_BIAS == 134 and lt.Epilogue.DGELU_BGRAD == 208
    assert lt.Epilogue.BGRADB == 512
    assert lt.MatmulDescAttribute.EPILOGUE_AUX_LD == 12
    assert lt.MatmulDescAttribute.AMAX_D_POINTER == 21
    assert lt.MatmulDescAttribute.BIAS_DATA_TYPE == 26
    assert lt.MatrixLayoutAttribute.STRIDED_BATCH_OFFSET == 6
    assert lt.PreferenceAttribute.IMPL_MASK == 12
    assert lt.AlgoConfigAttribute.CLUSTER_SHAPE_ID == 8
    assert lt.AlgoCapAttribute.FLOATING_POINT_EMULATION_SUPPORT == 22
    assert ctypes.sizeof(lt.MatmulAlgo) == 64
    assert ctypes.sizeof(lt.HeuristicResult) == 96


def test_every_attribute_has_a_ctype():
    for enum_cls, types in lt.ATTRIBUTE_CTYPES.items():
        for member in enum_cls:
            if member.name in ("TILE_IDS", "STAGES_IDS"):
                continue
            assert member.name in types, (enum_cls.__name__, member.name)


def test_nothing_loaded_at_import():
    """Importing cuweave (and running on the CPU) loads no cuBLASLt: checked in a fresh
    process, since other tests of this session may have loaded it."""
    code = ("import numpy as np, cuweave\n"
            "from cuweave.linalg.advanced import matmul\n"
            "matmul(np.ones((2, 3)), np.ones((3, 2)), execution='cpu')\n"
            "from cuweave._bindings import cublaslt as lt\n"
            "assert lt._lib is None, lt._lib\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
def test_live_handle_layouts_and_heuristics():
    from cuweave._bindings.library_types import ComputeType, CudaDataType

    assert lt.get_version() >= 130000
    h = lt.create()
    desc = lt.matmul_desc_create(ComputeType.COMPUTE_32F, CudaDataType.CUDA_R_32F)
    lt.matmul_desc_set_attribute(desc, lt.MatmulDescAttribute.TRANSA, lt.Operation.T)
    assert lt.matmul_desc_get_attribute(desc, lt.MatmulDescAttribute.TRANSA) == 1
    lay = lt.matrix_layout_create(CudaDataType.CUDA_R_32F, 64, 64, 64)
    pref = lt.preference_create()
    lt.preference_set_attribute(pref, lt.PreferenceAttribute.MAX_WORKSPACE_BYTES, 1 << 22)
    res = lt.algo_get_heuristic(h, desc, lay, lay, lay, lay, pref, 4)
    assert res and res[0].state == 0
    algo = res[0].algo
    assert lt.algo_config_get_attribute(algo, lt.AlgoConfigAttribute.ID) >= 0
    assert isinstance(lt.algo_cap_get_attribute(algo, lt.AlgoCapAttribute.TILE_IDS), list)
    ids = lt.algo_get_ids(h, ComputeType.COMPUTE_32F, CudaDataType.CUDA_R_32F,
                          CudaDataType.CUDA_R_32F, CudaDataType.CUDA_R_32F,
                          CudaDataType.CUDA_R_32F, CudaDataType.CUDA_R_32F, 16)
    assert ids
    with pytest.raises(lt.CublasLtError, match="CUBLAS_STATUS"):
        lt.matrix_layout_set_attribute(lay, lt.MatrixLayoutAttribute.LD, ctypes.c_int8(1))
    lt.preference_destroy(pref)
    lt.matrix_layout_destroy(lay)
    lt.matmul_desc_destroy(desc)
    lt.destroy(h)
