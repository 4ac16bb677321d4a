"""Package-level behaviour: lazy imports, info, CLI, errors, dtypes, doctests."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys

import numpy as np
import pytest

import cuweave
from cuweave._internal import dtypes
from cuweave._internal.errors import CublasLtError, CufftError, LibraryNotFoundError


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_does_not_import_heavy_packages():
    out = _run("import sys, cuweave, cuweave.linalg.advanced, cuweave.fft\n"
               "print(sorted(m for m in ('torch', 'cupy', 'numba', 'cuda.bindings') "
               "if m in sys.modules))")
    assert out == "[]"


def test_import_works_without_cuda_packages():
    # Hide the CUDA Python packages entirely: import and CPU info must still work.
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('cuda', 'torch', 'cupy', 'numba'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import cuweave\n"
            "d = cuweave.info()\n"
            "print(cuweave.is_available(), d['cuda']['usable'], d['execution_spaces']['cpu'])")
    assert _run(code) == "False False True"


def test_info_cli_truthful_on_this_machine():
    out = subprocess.run([sys.executable, "-m", "cuweave", "info", "--json"],
                         capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    from cuweave._internal import cuda

    assert d["cuda"]["usable"] == cuda.is_available()
    assert len(d["gpus"]) == (cuda.device_count() if cuda.is_available() else 0)
    assert d["packages"]["numpy"] == np.__version__
    for lib in ("cublasLt", "cufft", "nvrtc", "cudart"):
        e = d["libraries"][lib]
        assert e["available"] == ("path" in e)
    text = subprocess.run([sys.executable, "-m", "cuweave", "info"], capture_output=True,
                          text=True, check=True).stdout
    assert "Execution spaces:" in text and "cpu" in text


def test_lazy_submodules_and_dir():
    assert "linalg" in dir(cuweave)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cuweave.nope  # noqa: B018


def test_library_errors_name_status_and_hint():
    e = CublasLtError(15, "cublasLtMatmul")
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in str(e) and "cublasLtMatmul" in str(e)
    assert e.status == 15 and "compute type" in str(e)
    assert "CUFFT_INVALID_SIZE" in str(CufftError(8))
    assert "UNKNOWN_STATUS_999" in str(CufftError(999))
    e = LibraryNotFoundError("nvidia-mathdx", "dx")
    assert "pip install 'cuweave[dx]'" in str(e) and isinstance(e, ImportError)


def test_missing_library_names_extra(monkeypatch):
    from cuweave._bindings import _loader

    monkeypatch.setitem(_loader.EXTRA_FOR_LIBRARY, "nosuchlib", "cu13")
    with pytest.raises(LibraryNotFoundError, match=r"nosuchlib could not.*cuweave\[cu13\]"):
        _loader.load_library("nosuchlib")


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_narrow_float_codecs_match_ml_dtypes(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(1).standard_normal(4096).astype(np.float32) * 30
    x[:4] = [0.0, -0.0, 1e-9, -1e-9]
    ref = x.astype(getattr(ml_dtypes, name))
    enc = dtypes.from_float32(x, name)
    bits = np.uint16 if name == "bfloat16" else np.uint8
    if name != "float8_e4m3fn":  # ml_dtypes does not saturate e4m3fn overflow: compare finite
        assert np.array_equal(enc.view(bits), ref.view(bits))
    else:
        finite = np.abs(x) <= 448
        assert np.array_equal(enc.view(bits)[finite], ref.view(bits)[finite])
        assert np.all(np.abs(dtypes.to_float32(enc, name)[~finite]) == 448)
    assert np.array_equal(dtypes.to_float32(ref, name), ref.astype(np.float32), equal_nan=True)


def test_canonical_names():
    assert dtypes.canonical_name(np.float32) == "float32"
    assert dtypes.canonical_name("torch.bfloat16") == "bfloat16"
    assert dtypes.canonical_name("half") == "float16"
    assert dtypes.real_dtype("complex128") == "float64" and dtypes.is_complex("complex64")


@pytest.mark.parametrize("module", ["cuweave._internal.memory", "cuweave._internal.cache",
                                    "cuweave._internal.lifecycle", "cuweave._internal.packages"])
def test_docstring_examples_run(module):
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.failed == 0 and res.attempted > 0
