"""The numpydoc examples of cuweave.sparse.advanced run (on the CPU) and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["cuweave.sparse.advanced.direct_solver"])
def test_examples(name):
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_import_cuweave_sparse_is_lazy():
    import subprocess
    import sys

    code = ("import sys, cuweave; import cuweave.sparse.advanced as s; "
            "bad = [m for m in ('torch', 'cupy', 'numba') if m in sys.modules]; "
            "assert not bad, bad; from cuweave._bindings import cudss; "
            "assert cudss.library_path() is None; print(s.DirectSolver.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "DirectSolver"
