"""CPU tests of cuweave.device that need no compiler: knob validation, errors, cache, import."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave.device as dx
from cuweave._internal.errors import InvalidOptionError, LibraryNotFoundError
from cuweave.device import _cache, _codegen
from cuweave.device import fft as fft_mod
from cuweave.device._options import Execution, FFTSpec, FFTType, normalize_sm


def test_import_does_not_import_numba():
    code = ("import sys, cuweave, cuweave.device; "
            "bad = [m for m in ('numba', 'torch', 'cupy') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_public_names():
    # the vector types and the cuBLASDx tensor functions are numba objects (lazily imported)
    numba_names = {n for n, module in dx._LAZY.items() if module != ".types"}
    has_numba = importlib.util.find_spec("numba") is not None
    for name in dx.__all__:
        if name in numba_names and not has_numba:
            continue
        assert hasattr(dx, name)
    assert dx.FFTType.r2c == 2 and dx.Direction.inverse == 1
    assert dx.types.complex64.dtype == np.dtype(np.complex64)
    assert dx.common_cuda.ComputeCapability(8, 6).integer == 860
    with pytest.raises(AttributeError, match="no attribute"):
        dx.not_a_name  # noqa: B018


@pytest.mark.parametrize(
    "kwargs, param",
    [
        (dict(fft_type="c2x", size=8), "fft_type"),
        (dict(size=8, direction="backward"), "direction"),
        (dict(fft_type="r2c", size=8, direction="inverse"), "direction"),
        (dict(fft_type="c2r", size=8, direction="forward"), "direction"),
        (dict(size=8, execution="Warp"), "execution"),
        (dict(size=8, precision=np.float16, ffts_per_block=3), "ffts_per_block"),
        (dict(size=8, precision=np.complex64), "precision"),
        (dict(size=8, precision=np.int32), "precision"),
        (dict(size=1), "size"),
        (dict(size=65536), "size"),
        (dict(size=8.0), "size"),
        (dict(size=65, execution="Thread"), "size"),
        (dict(size=64, elements_per_thread=3), "elements_per_thread"),
        (dict(size=64, elements_per_thread=0), "elements_per_thread"),
        (dict(size=64, elements_per_thread="best"), "elements_per_thread"),
        (dict(size=64, ffts_per_block=-1), "ffts_per_block"),
        (dict(size=64, ffts_per_block=4096), "ffts_per_block"),
        (dict(size=16, execution="Thread", ffts_per_block=2), "ffts_per_block"),
        (dict(size=16, execution="Thread", elements_per_thread=4), "elements_per_thread"),
        (dict(size=16, real_fft_options={"complex_layout": "packed"}), "real_fft_options"),
        (dict(fft_type="r2c", size=16, real_fft_options={"layout": "packed"}),
         "real_fft_options"),
        (dict(fft_type="r2c", size=16, real_fft_options={"complex_layout": "odd"}),
         "complex_layout"),
        (dict(fft_type="r2c", size=15, real_fft_options={"real_mode": "folded"}), "size"),
        (dict(size=16, sm=42), "sm"),
        (dict(size=16, sm="sm_xx"), "sm"),
    ],
)
def test_invalid_knobs_name_the_parameter(kwargs, param):
    kwargs.setdefault("sm", 90)
    with pytest.raises(InvalidOptionError, match=param) as info:
        dx.FFT(**kwargs)
    assert "must be" in str(info.value)


def test_spec_defaults_and_normalization():
    s = FFTSpec.from_knobs("C2R", np.int64(32), "float64", sm=(9, 0))
    assert s.fft_type is FFTType.c2r and s.direction.name == "inverse"
    assert s.size == 32 and s.precision == "float64" and s.sm == 900
    assert FFTSpec.from_knobs("r2c", 32, sm=90).direction.name == "forward"
    assert s.execution is Execution.Block
    folded = FFTSpec.from_knobs("r2c", 64, real_fft_options={"real_mode": "folded"}, sm=90)
    assert folded.execution_size == 32 and 32 in folded.ept_candidates()
    assert hash(s.key()) == hash(FFTSpec.from_knobs("c2r", 32, np.float64, sm=900).key())


@pytest.mark.parametrize("sm, expected", [(90, 900), (900, 900), ((8, 0), 800), ("sm_86", 860),
                                          ("90", 900)])
def test_normalize_sm(sm, expected):
    assert normalize_sm(sm) == expected


@settings(max_examples=40, deadline=None)
@given(size=st.integers(2, 4096), ept=st.integers(1, 64))
def test_ept_must_divide_size(size, ept):
    ok = size % ept == 0
    try:
        FFTSpec.from_knobs("c2c", size, elements_per_thread=ept, sm=90)
    except InvalidOptionError as e:
        assert not ok and "elements_per_thread" in str(e)
    else:
        assert ok


def test_missing_mathdx_names_dx_extra(monkeypatch):
    pytest.importorskip("numba.cuda")  # without numba the numba check (below) answers first
    real = importlib.util.find_spec

    def fake(name, *a, **k):
        return None if name.startswith("nvidia.mathdx") else real(name, *a, **k)

    caches = (_codegen.mathdx_include, _codegen.database_sizes, _codegen.toolchain_versions)
    for fn in caches:
        fn.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", fake)
    try:
        with pytest.raises(LibraryNotFoundError) as info:
            dx.FFT("c2c", 64, sm=90)
    finally:
        for fn in caches:
            fn.cache_clear()
    assert info.value.extra == "dx" and "nvidia-mathdx" in str(info.value)


def test_missing_numba_names_dx_extra(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *a, **k):
        return None if name.split(".")[0] == "numba" else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(LibraryNotFoundError) as info:
        dx.FFT("c2c", 64, sm=90)
    assert info.value.extra == "dx" and "numba-cuda" in str(info.value)


def test_sm_required_without_gpu(monkeypatch):
    from cuweave._internal import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with pytest.raises(Exception, match="sm must be given"):
        fft_mod.default_sm()


def test_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("CUWEAVE_CACHE_DIR", str(tmp_path))
    _cache.clear_memory()
    key = _cache.make_key(["a", 1, {"b": 2}])
    assert key == _cache.make_key(["a", 1, {"b": 2}]) and key != _cache.make_key(["a", 2])
    assert _cache.load(key) is None
    traits = {"ok": 1, "storage_size": 8}
    _cache.store(key, {"traits": traits, "symbol": "s", "ltoir": b"\x00IR", "error": None})
    _cache.clear_memory()
    entry = _cache.load(key)
    assert entry["traits"] == traits and entry["ltoir"] == b"\x00IR" and entry["symbol"] == "s"
    assert (tmp_path / "device" / f"{key}.ltoir").exists()
    _cache.store("neg", {"traits": None, "symbol": "t", "ltoir": None, "error": "bad"})
    _cache.clear_memory()
    assert _cache.load("neg")["error"] == "bad" and _cache.load("neg")["ltoir"] is None
    _cache.clear_memory()


def test_unwritable_cache_only_logs(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("CUWEAVE_CACHE_DIR", str(blocker))
    _cache.store("k", {"traits": {}, "symbol": "s", "ltoir": b"x", "error": None})
    assert _cache.load("k")["ltoir"] == b"x"  # still served from memory
    _cache.clear_memory()


def test_generated_source_has_every_knob():
    spec = FFTSpec.from_knobs("r2c", 128, np.float64, elements_per_thread=8,
                              ffts_per_block="suggested",
                              real_fft_options={"complex_layout": "packed"}, sm=(8, 0))
    src = _codegen.generate_source(spec, "my_symbol")
    for piece in ("Size<128u>", "Precision<double>", "fft_type::r2c", "fft_direction::forward",
                  "SM<800u>", "Block()", "ElementsPerThread<8u>",
                  "D::suggested_ffts_per_block", "complex_layout::packed",
                  'extern "C" __device__ int my_symbol(void* td, void* sm)'):
        assert piece in src, piece
    thread = _codegen.generate_source(FFTSpec.from_knobs("c2c", 16, execution="Thread",
                                                         sm=90), "t")
    assert "Thread()" in thread and "FFTsPerBlock" not in thread and "(void* td)" in thread


def test_parse_report():
    spec = FFTSpec.from_knobs("c2c", 8, sm=90)
    log = ('warning: function "cw_emit<R>() [with R=<unnamed>::cw_traits_report<1U, 4U, 2U, '
           '1U, 2U, 128U, 4U, 2U, 2U, 0U, 2U, 2U, 8U, 8U, 1U, 4U>]" was declared deprecated\n'
           'warning: function "cw_emit<R>() [with R=<unnamed>::cw_ept_report<0U, 1U, 1U, 0U>]"')
    traits = _codegen.parse_report(log, spec)
    assert traits["block_dim_x"] == 4 and traits["shared_memory_size"] == 128
    assert traits["suggested_ffts_per_block"] == 4
    assert traits["valid_elements_per_thread"] == [2, 4]
    with pytest.raises(_codegen.NvrtcError):
        _codegen.parse_report("no report here", spec)
