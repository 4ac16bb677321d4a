"""The dense-form kernel of ``MatmulOptions(structured="dense")``: its source compiles with
NVRTC for sm_90 (no GPU needed; skipped without cuda.core / NVRTC), exports one kernel per
dtype, and its NumPy twin (what the CPU backend and the fake GPU run) equals the logical
matrix of every qualifier. The kernel's launch is tested on a GPU (test_linalg_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.linalg.generic._densify import MODES, SOURCE, densify_host
from tests.linalg.generic._reference import logical, rand


def test_kernel_source_compiles_for_sm90():
    core = pytest.importorskip("cuda.core")
    try:
        prog = core.Program(SOURCE, code_type="c++",
                            options=core.ProgramOptions(arch="sm_90", std="c++17"))
        module = prog.compile("cubin")
    except Exception as e:  # no usable NVRTC here
        if "nvrtc" in str(e).lower() and "not found" in str(e).lower():
            pytest.skip(f"NVRTC is not usable: {e}")
        raise
    assert len(module.code) > 1000
    for dt in ("float32", "float64", "complex64", "complex128"):
        assert f"densify_{dt}".encode() in bytes(module.code)
    assert b"batch_pointers" in bytes(module.code)


@pytest.mark.parametrize("kind", ["tr", "tr_unit", "sy", "he"])
@pytest.mark.parametrize("lower", [True, False])
def test_numpy_twin_is_the_logical_matrix(kind, lower):
    x = rand((7, 7), "complex128", np.random.default_rng(0))
    want = logical(x, kind[:2], lower=lower, unit=kind == "tr_unit")
    assert np.array_equal(densify_host(x, MODES[kind], lower), want)
