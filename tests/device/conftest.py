"""Fixtures shared by the device tests (GPU skips are decided in tests/conftest.py)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# Code-generation processes per warm_cache/warm_kernels call: the CPUs shared out among
# pytest-xdist's workers, each of which builds its own module fixtures (8 workers each spawning
# one process per CPU oversubscribed the GPU machine: the module fixtures errored).
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
WARM_WORKERS = max(1, (os.cpu_count() or 1) // _XDIST_WORKERS)


@pytest.fixture(scope="module")
def bench():
    """benchmarks/cases_device_fft.py (it imports the benchmark harness from its folder)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        module = importlib.import_module("cases_device_fft")
    sys.modules.pop("cases_device_fft", None)
    return module
