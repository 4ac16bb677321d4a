"""Every entry point of the cuFFT path passes the same native arguments (differential test).

A grid of configurations (transform type, layout, in place, ``norm``, host operands staged
through the GPU) runs through each entry point under the recording fakes of
:mod:`tests.fakes.cufft`; each ``cufftXtExec`` is reduced to its arguments with pointers named
by role (the operand, the object's buffers by size, pointers new to the call numbered in order
of appearance) and the stream set on its plan. All entry points must agree.
"""

from __future__ import annotations

import itertools
import sys

import pytest

import cuweave.fft as F
from tests.fakes.cufft import fake_cuda

torch = pytest.importorskip("torch")
run_mod = sys.modules["cuweave.fft._run"]


class _Stager:
    def upload(self, host, ptr, stream, direct=False):
        pass

    def download(self, ptr, dst, stream):
        pass


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(run_mod, "shared_stager", lambda: _Stager())
    with fake_cuda() as f:
        yield f


def _reduce(fake, operand_ptr, n_before):
    """The exec calls after ``n_before``, role-named, with the stream of their plan."""
    out = []
    buffers = {e[1]: f"buffer of {e[2]} B" for e in fake.ops("alloc")}  # the objects' own
    for name, handle, i, o, d in fake.execs[n_before:]:
        roles, fresh = {operand_ptr: "x", **buffers}, itertools.count()
        for p in (i, o):
            if p not in roles:
                roles[p] = f"new{next(fresh)}"
        stream = [s for h, s in fake.set_streams if h == handle][-1]
        out.append((name, roles[i], roles[o], d, stream, i == o))
    return out


_FORMS = {"C2C": F.fft, "R2C": F.rfft, "C2R": F.irfft}
_GRID = [(fft_type, package, inplace, norm)
         for fft_type in ("C2C", "R2C", "C2R")
         for package in ("torch", "numpy")
         for inplace in (False, True)
         for norm in (None, "backward")
         if not (inplace and fft_type != "C2C")]


def _operand(package, fft_type):
    g = torch.Generator().manual_seed(0)
    if fft_type == "R2C":
        x = torch.randn(8, 64, generator=g)
    else:
        x = torch.randn(8, 64, dtype=torch.complex64, generator=g)
    return x if package == "torch" else x.numpy()


@pytest.mark.parametrize("fft_type, package, inplace, norm", _GRID)
def test_every_entry_point_passes_the_same_native_arguments(fake, fft_type, package, inplace,
                                                            norm):
    x = _operand(package, fft_type)
    ptr = x.data_ptr() if package == "torch" else x.ctypes.data
    options = {"fft_type": fft_type, "inplace": inplace}
    execution = "cuda" if package == "numpy" else None
    form = _FORMS[fft_type]
    f = F.FFT(x, axes=(1,), options=options, execution=execution)
    f.plan(norm=norm)
    direction = f._plan.direction
    form_kw = {"axes": (1,), "execution": execution, "norm": norm}
    if inplace:
        form_kw["options"] = {"inplace": True}
    entries = {
        "execute()": lambda: f.execute(),
        "execute() again": lambda: f.execute(),
        "execute(direction=)": lambda: f.execute(direction=direction),
        "execute(stream=0)": lambda: f.execute(stream=0),
        "reset_operand; execute()": lambda: (f.reset_operand(x), f.execute())[1],
        "function form": lambda: form(x, **form_kw),
        "function form cached": lambda: form(x, **form_kw),
    }
    seen = {}
    for name, fn in entries.items():
        before = len(fake.execs)
        fn()
        (seen[name],) = _reduce(fake, ptr, before)
    f.free()
    F.plan_cache.clear()
    first = seen["execute()"]
    assert first[3] == int(direction) and first[4] == 0
    assert (first[1] == "x") == (package == "torch" and fft_type != "C2R")
    assert first[5] == inplace  # in place: the input is the output
    for name, got in seen.items():
        assert got == first, f"{name}: {got} != execute(): {first}"
