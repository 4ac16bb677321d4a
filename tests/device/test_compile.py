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
    assert f.elements_per_thread in f.valid("elements_per_thread")
    assert f.suggested_ffts_per_block >= 1
    pairs = f.valid("elements_per_thread", "ffts_per_block")
    assert (f.elements_per_thread, 1) in pairs
    assert all(256 // e * b <= 1024 for e, b in pairs)
    assert f._ltoir and len(f._ltoir) > 1000
    assert f.fft_type == "c2c" and f.direction == "forward" and f.sm == 900
    assert "size=256" in repr(f)
    with pytest.raises(InvalidOptionError, match="knobs"):
        f.valid("block_dim")


def test_thread_traits(built):
    f = built["thread"]
    assert tuple(f.block_dim) == (1, 1, 1) and f.shared_memory_size == 0
    assert f.elements_per_thread == 16 and f.storage_size >= 16 and f.stride == 1
    assert f.precision is np.float64
    assert f.valid("elements_per_thread") == [16]


def test_unsupported_ept_lists_valid_values(built):
    valid = built["block"].valid("elements_per_thread")
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
