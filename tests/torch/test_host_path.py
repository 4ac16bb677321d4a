"""The layers' lean host path: ``Matmul.reset_operands_unchecked`` sets the new pointers on
the planned records (no wrapping) and falls back to the general reset where a record would
differ; the eager layers' results and gradients stay torch's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cuweave._bindings import cublaslt as lt  # noqa: E402
from cuweave._internal import wrapping  # noqa: E402
from cuweave._internal._torch import TORCH  # noqa: E402
from cuweave.linalg.advanced import Matmul  # noqa: E402
from tests.fakes.cublaslt import gpu  # noqa: E402,F401

_BIAS = int(lt.MatmulDescAttribute.BIAS_POINTER)
_AUX = int(lt.MatmulDescAttribute.EPILOGUE_AUX_POINTER)


def _bound(fake, attr):
    return [v for _, a, v in fake.set_calls if a == attr]


def test_unchecked_reset_repoints_without_wrapping(gpu, monkeypatch):  # noqa: F811
    a, b, bias = gpu.tensor(64, 32), gpu.tensor(32, 48), gpu.tensor(1, 48)
    mm = Matmul(a, b)
    mm.plan(epilog="bias", epilog_inputs={"bias": bias})
    wrapped = []
    monkeypatch.setattr(wrapping, "wrap_torch", lambda *x: wrapped.append(x))
    a2, b2, bias2 = gpu.tensor(64, 32), gpu.tensor(32, 48), gpu.tensor(1, 48)
    mm.reset_operands_unchecked(a2, b2, epilog_inputs={"bias": bias2})
    mm.execute()
    (call,) = gpu.matmul_calls
    assert wrapped == []
    # a row-major result: D^T = B^T A^T, so b comes first in the lt frame
    assert (call[3], call[5]) == (b2.data_ptr(), a2.data_ptr())
    assert _bound(gpu, _BIAS)[-1] == bias2.data_ptr()
    mm.reset_operands_unchecked(b=b)  # one operand: the other keeps its pointer
    mm.execute()
    assert (gpu.matmul_calls[-1][3], gpu.matmul_calls[-1][5]) == (b.data_ptr(), a2.data_ptr())
    mm.free()


def test_unchecked_reset_falls_back_where_records_differ(gpu):  # noqa: F811
    a, b = gpu.tensor(64, 32), gpu.tensor(32, 48)
    mm = Matmul(a, b)
    mm.plan(epilog="relu_aux")
    _, aux = mm.execute()
    dy = gpu.tensor(64, 16)  # the result (64, 48) again: the forward's pre-activation
    back = Matmul(dy, gpu.tensor(16, 48))
    back.plan(epilog="drelu", epilog_inputs={"relu_aux": aux["relu_aux"]})
    with pytest.raises(Exception, match="epilog_inputs"):  # the names are still checked
        back.reset_operands_unchecked(dy, epilog_inputs={"bias": aux["relu_aux"]})
    _, aux2 = mm.execute()
    back.reset_operands_unchecked(dy, epilog_inputs={"relu_aux": aux2["relu_aux"]})
    back.execute()
    assert _bound(gpu, _AUX)[-1] == aux2["relu_aux"].data_ptr()
    mm.free()
    back.free()


def test_plain_pointer_leaves_lazy_tensors_to_wrapping():
    x = torch.randn(4, 4)
    assert TORCH.plain_pointer(x) == x.data_ptr()
    assert TORCH.plain_pointer(torch._neg_view(x)) is None
    assert TORCH.plain_pointer(torch.randn(3, dtype=torch.complex64).conj()) is None
    assert TORCH.plain_pointer(object()) is None


def test_parametrized_weights_are_read_as_attributes():
    from torch.nn.utils import parametrize

    from cuweave.torch import FusedLinear, FusedMLP

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    torch.manual_seed(0)
    layer = FusedLinear(8, 4, dtype=torch.float64)
    parametrize.register_parametrization(layer, "weight", Double())
    x = torch.randn(3, 8, dtype=torch.float64)
    w = 2 * layer.parametrizations.weight.original
    torch.testing.assert_close(layer(x), x @ w.T + layer.bias)
    block = FusedMLP(8, 16, dtype=torch.float64)
    parametrize.register_parametrization(block.fc2, "weight", Double())
    h = torch.nn.functional.gelu(x @ block.fc1.weight.T + block.fc1.bias, approximate="tanh")
    ref = h @ (2 * block.fc2.parametrizations.weight.original).T + block.fc2.bias
    torch.testing.assert_close(block(x), ref)


def test_eager_backward_helpers_skip_unrequested_bias_gradients():
    from cuweave.torch import _ops

    x, dz = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    dw, db = _ops._wgrad(x, dz, False)
    assert db is None
    torch.testing.assert_close(dw, dz.T @ x)
    dw, db = _ops._linear_wgrad_impl(x, dz, False)  # the operator's: an empty tensor
    assert db.shape == (0,)
