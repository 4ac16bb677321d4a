"""The warning where autograd would be lost silently (cuweave._autograd), on its own: the lead
wires it into the engines' function forms and constructors."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from cuweave._autograd import AutogradWarning, warn_if_autograd_is_lost


def _caller(**operands):
    warn_if_autograd_is_lost("cuweave.linalg.advanced.matmul", operands)


def test_warns_for_a_tensor_requiring_grad_and_names_it():
    torch = pytest.importorskip("torch")
    a = torch.ones(2, 2, requires_grad=True)
    with pytest.warns(AutogradWarning, match=r"^a requires grad, but cuweave\.linalg\.advanced"
                      r"\.matmul is not recorded by autograd.*cuweave\.torch") as record:
        _caller(a=a, b=torch.ones(2, 2))
    assert len(record) == 1 and record[0].filename == __file__  # points at the user's line


def test_silent_without_grad_under_no_grad_and_for_other_arrays():
    torch = pytest.importorskip("torch")
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _caller(a=torch.ones(2), b=None, c=np.ones(2))
        _caller(a=torch.ones(2, requires_grad=True).detach())
        with torch.no_grad():
            _caller(a=torch.ones(2, requires_grad=True))


def test_does_not_import_torch():
    code = ("import sys, warnings\n"
            "from cuweave._autograd import warn_if_autograd_is_lost\n"
            "warnings.simplefilter('error')\n"
            "warn_if_autograd_is_lost('f', {'a': [1.0]})\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
