"""The one place GPU skips are decided; and memory freed by a test goes back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

import pytest


def _cuda_device_count() -> int:
    try:
        from cuweave._internal import cuda
    except Exception:  # pragma: no cover - foundation import failure shows elsewhere
        return 0
    try:
        return cuda.device_count() if cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    n = None
    for item in items:
        needs = 2 if "multi_gpu" in item.keywords else 1 if "gpu" in item.keywords else 0
        if not needs:
            continue
        if n is None:
            n = _cuda_device_count()
        if n < needs:
            reason = "needs a usable CUDA device" if needs == 1 else "needs two CUDA devices"
            # first among the item's skipif marks, which pytest reads before its skip marks:
            # a test's own skipif (say, "needs compute capability 8.9") must not give the
            # reason on a machine that has no GPU at all
            item.add_marker(pytest.mark.skipif(True, reason=f"{reason} (found {n})"),
                            append=False)


# ---- memory: what a test allocated and freed goes back to the system ----------------------------
# A compilation in the process (NVRTC through libmathdx, NVVM) peaks near 1 GB and frees it, but
# glibc keeps the freed pages: without a trim every worker kept the largest peak it ever saw.
_TRIM_AFTER_GROWTH = 256 << 20  # bytes of growth since the last trim that trigger the next
_RSS_AT_LAST_TRIM = [0]


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux
        return 0


def _malloc_trim() -> None:
    """Give the C heap's free pages back to the system (glibc; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    rss = _rss()
    if rss - _RSS_AT_LAST_TRIM[0] > _TRIM_AFTER_GROWTH:
        gc.collect()
        _malloc_trim()
        _RSS_AT_LAST_TRIM[0] = _rss()


# ---- the collector: what collection imported lives to the end ------------------------------------
def pytest_collection_finish(session):
    """Move everything alive after collection (the test modules, torch, JAX, numba, hypothesis's
    strategies: about a million objects) out of the cyclic collector's view. A full collection,
    the tests' own ``gc.collect()`` and the interpreter's, then costs microseconds instead of
    about half a second each."""
    gc.freeze()
