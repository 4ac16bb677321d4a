"""Fixtures shared by the device tests (GPU skips are decided in tests/conftest.py)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/cases_device_fft.py (it imports the benchmark harness from its folder)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        module = importlib.import_module("cases_device_fft")
    sys.modules.pop("cases_device_fft", None)
    return module
