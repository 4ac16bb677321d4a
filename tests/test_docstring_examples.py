"""The numpydoc examples of the public entry points run (on the CPU) and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["cuweave.linalg.advanced", "cuweave.linalg.advanced.matmul", "cuweave.fft.fft",
           "cuweave.fft._numpy_api", "cuweave.fft.scipy_backend", "cuweave._internal.errors",
           "cuweave._internal.options", "cuweave._internal.memory",
           "cuweave.linalg.advanced._algorithm", "cuweave.linalg.advanced._options",
           "cuweave.linalg.advanced._autotune_cache", "cuweave.linalg.advanced.helpers.matmul"]
# modules whose examples need an optional package
NEEDS = {"cuweave.linalg.advanced.helpers.matmul": "torch"}


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
