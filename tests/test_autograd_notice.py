"""The warning where autograd would be lost silently: torch tensors that require gradients
given to the engines' function forms and constructors (cuweave._internal.autograd, called by
torch's adapter when it wraps a tensor)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal.autograd import AutogradWarning
from cuweave.linalg.advanced import Matmul, matmul


def test_warns_for_a_tensor_requiring_grad_and_points_at_the_caller():
    torch = pytest.importorskip("torch")
    a = torch.ones(4, 4, requires_grad=True)
    for _ in range(2):  # a cached plan too: the fast path leaves such tensors to wrapping
        with pytest.warns(AutogradWarning, match=r"^a requires grad, but this cuweave call is "
                          r"not recorded by autograd.*cuweave\.torch") as record:
            matmul(a, torch.ones(4, 4), execution="cpu")
        assert len(record) == 1 and record[0].filename == __file__  # the user's line
    with pytest.warns(AutogradWarning, match="^b requires grad"):
        Matmul(torch.ones(4, 4), a, execution="cpu").free()
    x = torch.ones(8, dtype=torch.complex64, requires_grad=True)
    with pytest.warns(AutogradWarning, match="^operand requires grad"):
        F.fft(x, execution="cpu")


def test_silent_without_grad_under_no_grad_and_for_other_arrays():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        matmul(torch.ones(4, 4), torch.ones(4, 4), execution="cpu")
        matmul(torch.ones(4, 4, requires_grad=True).detach(), torch.ones(4, 4),
               execution="cpu")
        with torch.no_grad():
            matmul(torch.ones(4, 4, requires_grad=True), torch.ones(4, 4), execution="cpu")
        matmul(np.ones((4, 4)), np.ones((4, 4)), execution="cpu")


def test_does_not_import_torch():
    code = ("import sys, warnings\n"
            "from cuweave._internal.autograd import warn_autograd_lost\n"
            "warnings.simplefilter('error')\n"
            "warn_autograd_lost('a')\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
