"""The one place GPU skips are decided."""

from __future__ import annotations

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
