"""The numpydoc examples of cuweave.tensor run on the CPU and print what they say; importing
the module loads no array package and no library."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

MODULES = ["cuweave.tensor", "cuweave.tensor._function", "cuweave.tensor._options",
           "cuweave.tensor._preference", "cuweave.tensor.contraction"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_import_is_light():
    code = ("import sys, cuweave.tensor; "
            "bad = [m for m in ('torch', 'cupy', 'numba') if m in sys.modules]; "
            "from cuweave._bindings import cutensor; "
            "assert cutensor.library_path() is None, 'libcutensor loaded at import'; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
