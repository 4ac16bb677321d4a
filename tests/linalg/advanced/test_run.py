"""Every entry point of the CUDA matmul passes the same native arguments (differential test).

A grid of configurations (package, layouts, epilog, ``c`` full or broadcast, in place) runs
through each entry point under the recording fakes of :mod:`tests.fakes.cublaslt`; every
``cublasLtMatmul`` call is reduced to its arguments with pointers named by role (the caller's
operands by name, the workspace, pointers new to the call numbered in order of appearance),
together with alpha, beta and the descriptor's pointer attributes at the call. All entry
points must agree.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from cuweave._bindings import cublaslt as lt
from cuweave.linalg.advanced import Matmul, matmul

_A = lt.MatmulDescAttribute
_POINTER_ATTRS = {int(a) for a in (_A.BIAS_POINTER, _A.EPILOGUE_AUX_POINTER, _A.A_SCALE_POINTER,
                                   _A.B_SCALE_POINTER, _A.C_SCALE_POINTER, _A.D_SCALE_POINTER,
                                   _A.AMAX_D_POINTER)}
M, K, N = 48, 32, 40  # M != N: the frame never depends on remembered aux outputs


def _record(gpu, names):
    """Install a hook reducing each cublasLtMatmul call to a role-named tuple."""
    calls = []

    def hook(args):
        roles, fresh = {args[13]: "workspace"}, itertools.count()

        def role(ptr):
            if ptr in names:
                return names[ptr]
            if ptr not in roles:
                roles[ptr] = f"new{next(fresh)}"
            return roles[ptr]

        desc = {}
        for d, attr, value in gpu.set_calls:
            if d == args[1] and attr in _POINTER_ATTRS:
                desc[attr] = value
        alpha = ctypes.c_float.from_address(args[2]).value
        beta = ctypes.c_float.from_address(args[7]).value
        calls.append((role(args[3]), role(args[5]), role(args[8]), role(args[10]), args[14],
                      args[15], alpha, beta,
                      tuple(sorted((attr, role(v)) for attr, v in desc.items()))))

    gpu.on_matmul = hook
    return calls


def _operands(gpu, package, layout, c_mode, order_c):
    order_a, order_b = layout
    c_shape = (M, 1) if c_mode == "broadcast" else (M, N)
    with_c = c_mode != "none"
    if package == "torch":
        a = gpu.tensor(M, K, order=order_a)
        b = gpu.tensor(K, N, order=order_b)
        c = gpu.tensor(*c_shape, order=order_c) if with_c else None
        bias = gpu.tensor(M)
    else:
        rng = np.random.default_rng(0)

        def arr(shape, order="C"):
            return np.asarray(rng.standard_normal(shape), np.float32, order=order)

        a, b = arr((M, K), order_a), arr((K, N), order_b)
        c = arr(c_shape, order_c) if with_c else None
        bias = arr((M,))
    return a, b, c, bias


_EPILOGS = [None, "RELU_BIAS", "RELU_AUX", "GELU_AUX_BIAS"]
_GRID = [(package, layout, epilog, c_mode)
         for package in ("torch", "numpy")
         for layout in (("C", "C"), ("F", "C"))
         for epilog in _EPILOGS
         for c_mode in ("none", "c", "broadcast", "inplace")]


@pytest.mark.parametrize("package, layout, epilog, c_mode", _GRID)
def test_every_entry_point_passes_the_same_native_arguments(gpu, package, layout, epilog,
                                                            c_mode):
    # a bias of length M and aux outputs need a column-major result: an in-place c is then
    order_c = "F" if c_mode == "inplace" and epilog else "C"
    a, b, c, bias = _operands(gpu, package, layout, c_mode, order_c)
    names = {}
    if package == "torch":
        names = {a.data_ptr(): "a", b.data_ptr(): "b", bias.data_ptr(): "bias"}
        if c is not None:
            names[c.data_ptr()] = "c"
    kw = {"alpha": 1.5}
    if c is not None:
        kw["beta"] = 0.5
    opts = {"inplace": True} if c_mode == "inplace" else None
    plan_kw = {}
    if epilog is not None:
        plan_kw["epilog"] = epilog
        if "BIAS" in epilog:
            plan_kw["epilog_inputs"] = {"bias": bias}
    calls = _record(gpu, names)
    mm = Matmul(a, b, c, options=opts, **kw)
    mm.plan(**plan_kw)
    entries = {
        "execute()": lambda: mm.execute(),
        "execute() again": lambda: mm.execute(),
        "execute(stream=0)": lambda: mm.execute(stream=0),
        "execute(algorithm=)": lambda: mm.execute(algorithm=mm.algorithms[0]),
        "reset_operands_unchecked; execute()": lambda: (
            mm.reset_operands_unchecked(a, b, c), mm.execute())[1],
        "matmul()": lambda: matmul(a, b, c, options=opts, **kw, **plan_kw),
        "matmul() cached": lambda: matmul(a, b, c, options=opts, **kw, **plan_kw),
    }
    seen = {}
    for name, fn in entries.items():
        before = len(calls)
        fn()
        assert len(calls) == before + 1, name
        seen[name] = calls[-1]
    mm.free()
    first = seen["execute()"]
    assert first[0] in ("a", "b", "new0") and first[5] == 0
    for name, got in seen.items():
        assert got == first, f"{name}: {got} != execute(): {first}"
