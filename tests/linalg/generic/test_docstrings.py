"""The numpydoc examples of cuweave.linalg's generic layer run on the CPU and print what they
say (as tests/test_docstring_examples.py does for the other engines)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["cuweave.linalg", "cuweave.linalg.generic", "cuweave.linalg.generic._qualifiers",
           "cuweave.linalg.generic.matmul", "cuweave.linalg.generic.solver",
           "cuweave._bindings.host_blas"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.failed == 0
    if name != "cuweave.linalg":
        assert res.attempted > 0
