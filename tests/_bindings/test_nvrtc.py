"""The NVRTC helper (CPU only: NVRTC compiles without a GPU)."""

from __future__ import annotations

import subprocess
import sys

import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")


def test_an_empty_log_leaves_the_interpreter_s_cached_bytes_alone():
    """NVRTC writes a lone NUL for an empty log. Into ``b" " * 1`` (CPython's cached ``b" "``)
    that poisoned the process: Python 3.12 then parsed ``" "`` in f-strings of modules
    imported later as NUL. Checked in a fresh interpreter, whose cache nothing else touched."""
    code = (
        "from cuweave._bindings.nvrtc import compile_ltoir\n"
        "ok, log, ir = compile_ltoir('__device__ int cw_x;', 'empty_log.cu', "
        "[b'-arch=sm_90', b'-rdc=true', b'-dlto'])\n"
        "assert ok and log == '' and ir, (ok, log)\n"
        "print(b' ' == bytes([32]), b' ' * 1 == bytes([32]), ' '.encode() == bytes([32]))\n"
    )
    try:
        nvrtc.nvrtcVersion()
    except Exception as e:  # libnvrtc not loadable
        pytest.skip(f"NVRTC is not loadable: {e}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True", "True"]
