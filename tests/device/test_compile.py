"""Compile-path tests (CPU only): NVRTC + cuFFTDx headers produce LTO-IR and traits.

Skipped when the optional packages (nvidia-mathdx, NVRTC, CCCL headers) are not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (the 'dx' extra) is not installed")
pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")

import cuweave.device as dx  # noqa: E402
from cuweave._internal.errors import InvalidOptionError, LibraryNotFoundError  # noqa: E402
from cuweave.device import _cache, _codegen  # noqa: E402
from tests.device._nvjitlink import LinkError, link_sm90  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    try:
        _codegen.toolchain_versions()
        _codegen.cccl_include()
        _codegen.cuda_include()
    except LibraryNotFoundError as e:
        pytest.skip(f"optional package missing: {e}")
    old = os.environ.get("CUWEAVE_CACHE_DIR")
    cache = str(tmp_path_factory.mktemp("dxcache"))
    os.environ["CUWEAVE_CACHE_DIR"] = cache
    _cache.clear_memory()
    try:
        block, thread = dx.warm_cache([
            dict(fft_type="c2c", size=256, precision=np.float32, sm=90),
            dict(fft_type="c2c", size=16, precision=np.float64, execution="Thread", sm=90),
        ], max_workers=2)
        yield {"block": block, "thread": thread, "cache": cache}
    finally:
        _cache.clear_memory()
        if old is None:
            os.environ.pop("CUWEAVE_CACHE_DIR", None)
        else:
            os.environ["CUWEAVE_CACHE_DIR"] = old


def test_block_traits_are_consistent(built):
    f = built["block"]
    assert f.ffts_per_block == 1 and f.block_dim.y == 1 and f.block_dim.z == 1
    assert f.block_dim.x * f.elements_per_thread == 256
    assert f.stride == f.block_dim.x
    assert f.storage_size >= f.elements_per_thread
    assert f.shared_memory_size > 0 and not f.requires_workspace
    assert f.input_length == f.output_length == 256
    assert (f.elements_per_thread,) in f.valid("elements_per_thread")
    assert f.suggested_ffts_per_block >= 1
    pairs = f.valid("elements_per_thread", "ffts_per_block")
    assert pairs == sorted(pairs) and all(256 // e * b <= 1024 for e, b in pairs)
    assert f._ltoir and len(f._ltoir) > 1000
    assert f.fft_type == "c2c" and f.direction == "forward" and f.sm == 900
    assert "size=256" in repr(f)
    with pytest.raises(InvalidOptionError, match="knobs"):
        f.valid("block_dim")


def test_thread_traits(built):
    f = built["thread"]
    # as in nvmath-python: no block traits for Thread execution
    assert f.block_dim is None and f.shared_memory_size is None and f.ffts_per_block is None
    assert f.elements_per_thread == 16 and f.storage_size >= 16 and f.stride == 1
    assert f.precision is np.float64
    assert f.valid("elements_per_thread") == [(16,)]
    assert f.valid("elements_per_thread", "ffts_per_block") == [(16, 1)]


def test_valid_lists_the_database_combinations_without_compiling(built, monkeypatch):
    """valid() follows nvmath-python: the (elements_per_thread, ffts_per_block) pairs of
    cuFFTDx's database for the FFT (the candidates an autotuner times), read from the records
    nvidia-mathdx ships; an explicit elements_per_thread restricts them."""
    import json

    f = built["block"]
    path = os.path.join(_codegen.mathdx_include(), "cufftdx", "database", "records", "900",
                        "database_fp32_fwd.json")
    with open(path, encoding="utf-8") as fh:
        entry = next(e for e in json.load(fh)["database"] if e["size"] == 256)
    expected = sorted({(b["ept"], b["fpb"]) for b in entry["blobs"]})

    def no_compile(*args, **kwargs):
        raise AssertionError("valid() compiled something")

    monkeypatch.setattr(_codegen, "compile_spec", no_compile)
    pairs = f.valid("elements_per_thread", "ffts_per_block")
    assert pairs == expected and 1 < len(pairs) < 40
    assert f.valid("ffts_per_block", "elements_per_thread") == sorted((b, e) for e, b in pairs)
    assert f.valid("elements_per_thread") == sorted({(e,) for e, _ in pairs})
    # the other architectures' records: sm_86 uses sm_70's (as cuFFTDx does)
    assert _codegen.database_knobs("float32", 860, 256) == _codegen.database_knobs(
        "float32", 700, 256)
    assert _codegen.database_knobs("float32", 900, 67) == ()


def test_unsupported_ept_lists_valid_values(built):
    valid = [e for (e,) in built["block"].valid("elements_per_thread")]
    bad = next(e for e in (64, 128, 1, 256) if e not in valid)
    with pytest.raises(InvalidOptionError, match="elements_per_thread") as info:
        dx.FFT("c2c", 256, np.float32, sm=90, elements_per_thread=bad)
    assert str(valid) in str(info.value)


def test_non_database_size_is_rejected_without_compiling(built):
    with pytest.raises(InvalidOptionError, match="size") as info:
        dx.FFT("c2c", 67, sm=90)
    assert "nearest" in str(info.value)
    sizes = dx.valid_sizes("c2c", np.float32, "Block", sm=90)
    assert 256 in sizes and 100 in sizes and 67 not in sizes and max(sizes) == 32768
    assert max(dx.valid_sizes("c2c", np.float64, "Thread", sm=90)) <= 40
    folded = dx.valid_sizes("r2c", sm=90, real_fft_options={"real_mode": "folded"})
    assert all(n % 2 == 0 for n in folded)


def test_second_process_hits_the_disk_cache(built):
    code = (
        "import numpy as np, cuweave.device as dx\n"
        "from cuweave.device import _codegen\n"
        "def boom(*a, **k):\n"
        "    raise SystemExit('compiled instead of using the cache')\n"
        "_codegen.compile_spec = boom\n"
        "f = dx.FFT('c2c', 256, np.float32, sm=90)\n"
        "print(f.block_dim.x, f.storage_size, f.shared_memory_size)\n"
    )
    env = dict(os.environ, CUWEAVE_CACHE_DIR=built["cache"],
               PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    f = built["block"]
    assert proc.stdout.split() == [str(f.block_dim.x), str(f.storage_size),
                                   str(f.shared_memory_size)]


def test_source_includes_only_its_own_implementation(built, monkeypatch):
    spec = built["block"]._spec
    source = _codegen.generate_source(spec, "cw_test")
    assert source.count('#include "cufftdx/database/fft_') == 1
    assert '#include "cufftdx/database/fft_256_fp32_fwd.hpp.inc"' in source
    assert b"-DCUFFTDX_DETAIL_USE_EXTERN_LUT" in _codegen._options(spec)  # the default
    monkeypatch.setenv("CUWEAVE_DX_EXTERN_TWIDDLES", "0")
    assert b"-DCUFFTDX_DETAIL_USE_EXTERN_LUT" not in _codegen._options(spec)  # tables inline
    contents, names = _codegen._overlays(spec)
    assert b"cufftdx/database/records/definitions_fp32_fwd.hpp.inc" in names
    assert b"cufftdx/database/records/900/database_fp32_fwd.hpp.inc" not in names
    assert set(contents) == {b"\n"}


@pytest.mark.slow  # two more NVRTC compilations of a device FFT
def test_missing_implementation_stops_the_compilation(built, monkeypatch):
    """Should a size need another file's functions, the first compilation fails (the generic
    function's static_assert) and the complete headers are used: the traits stay right."""
    spec = built["block"]._spec
    monkeypatch.setattr(_codegen, "_implementation_file",
                        lambda s: "cufftdx/database/fft_128_fp32_fwd.hpp.inc")
    source = _codegen.generate_source(spec, "cw_test_missing")
    ok, log, _ = _codegen._run_nvrtc(source, "m.cu", _codegen._options(spec),
                                     _codegen._overlays(spec))
    assert not ok and "implementation file not included" in log
    entry = _codegen.compile_spec(spec, "cw_test_missing")
    assert entry["ltoir"] and entry["traits"]["storage_size"] == built["block"].storage_size


def test_a_failing_precompiled_header_is_retried_without_and_turned_off(monkeypatch, caplog):
    """A compilation that fails with NVRTC's PCH and succeeds without it succeeds, turns the
    PCH off for the process and says so, quoting where the failing log was saved."""
    calls = []

    def fake(source, name, options, headers=((), ())):
        calls.append(list(options))
        if b"-pch" in options:
            return False, "m.cu(3): error: explicit type is missing", None
        return True, "", b"IR"

    monkeypatch.setattr(_codegen, "compile_ltoir", fake)
    monkeypatch.setattr(_codegen, "_pch_state", {"compiles": 5, "ok": True})
    with caplog.at_level("WARNING", logger="cuweave.device"):
        ok, _, ir = _codegen._run_nvrtc("int x;", "m.cu", [b"-std=c++17"])
    assert (ok, ir) == (True, b"IR")
    assert [b"-pch" in c for c in calls] == [True, False]
    assert _codegen._pch_state["ok"] is False
    message = caplog.text
    assert "explicit type is missing" in message and "whole log:" in message
    path = message.split("whole log: ")[1].split(")")[0]
    with open(path, encoding="utf-8") as f:
        assert "-pch" in f.read()
    os.unlink(path)
    calls.clear()  # later compilations of the process use no PCH
    _codegen._run_nvrtc("int x;", "m.cu", [b"-std=c++17"])
    assert calls == [[b"-std=c++17"]]


def _link_sm90(*objects):
    """``(True, "")`` when the LTO-IR objects link for sm_90, else ``(False, log)``."""
    try:
        link_sm90([(data, f"in{i}") for i, data in enumerate(objects)])
    except LinkError as e:
        return False, str(e)
    return True, ""


@pytest.mark.slow  # three links; test_kernel_objects.py links device FFT kernels in the fast set
def test_kernel_links_with_the_shared_twiddle_tables(built, monkeypatch):
    """A numba kernel calling fft.execute links for sm_90 with the FFT's code, which defines
    the twiddle tables with CUWEAVE_DX_EXTERN_TWIDDLES=0; by default the code declares them
    only, the kernel links the tables compiled once per architecture (without them the
    twiddles stay undefined), and execute can bring them in its link list itself."""
    cuda = pytest.importorskip("numba.cuda")
    import types as pytypes

    from numba.cuda import dispatcher

    from cuweave.device import _numba_ext

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    f = built["block"]

    def kernel(x):
        td = cuda.local.array(f.storage_size, dtype=f.value_type)
        sm = cuda.shared.array(0, dtype=f.value_type)
        for i in range(f.elements_per_thread):
            td[i] = x[cuda.threadIdx.x + i * f.stride]
        f.execute(td, sm)
        for i in range(f.elements_per_thread):
            x[cuda.threadIdx.x + i * f.stride] = td[i]

    try:
        ir, _ = cuda.compile(kernel, (cuda.types.complex64[::1],), cc=(9, 0), output="ltoir",
                             device=False, abi="numba")
    except Exception as e:
        if "NVVM" in type(e).__name__ or "libNVVM" in str(e):
            pytest.skip(f"libNVVM is not available: {e}")
        raise
    monkeypatch.setenv("CUWEAVE_DX_EXTERN_TWIDDLES", "0")  # tables in the FFT's code
    inline = _codegen.compile_spec(f._spec, f._symbol)["ltoir"]
    assert _link_sm90(ir, inline) == (True, "")
    monkeypatch.delenv("CUWEAVE_DX_EXTERN_TWIDDLES")  # the default: declared only, one IR
    extern = _codegen.compile_spec(f._spec, f._symbol)["ltoir"]
    assert _link_sm90(ir, extern, _codegen.lut_ltoir(900)) == (True, "")
    ok, log = _link_sm90(ir, extern)
    assert not ok and "lut_" in log
    seen = {}
    real_declare = cuda.declare_device
    monkeypatch.setattr(cuda, "declare_device",
                        lambda *a, **k: (seen.update(link=k["link"]), real_declare(*a, **k))[1])
    _numba_ext.make_execute("cw_probe", f._ltoir, True, 900)
    assert _numba_ext.fft_tables(900) in seen["link"]
    assert _numba_ext.fft_tables(900) is _numba_ext.fft_tables(900)
