"""The ctypes declarations of cuBLAS and cuSOLVER-Dn (``cuweave._bindings.cublas`` and
``cusolver``) against the CUDA 13 headers of the NVIDIA wheels (``nvidia/cu13/include``:
cublas_api.h from nvidia-cublas, cusolverDn.h / cusolver_common.h from nvidia-cusolver).
Without the headers these tests skip. Every declared enum member must equal the header's
enumerator, and every declared function must take as many arguments as its prototype, pointers
exactly where it has pointers and 64-bit integers where it has ``int64_t``/``long long``.
"""

from __future__ import annotations

import ctypes
import os
import re

import pytest

from cuweave._bindings import cublas, cusolver
from tests._bindings.test_headers import _constants, _prototype

_CUBLAS = ("library_types.h", "cublas_api.h")
_CUSOLVER = ("cusolver_common.h", "cusolverDn.h")


def _read(names) -> str | None:
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        inc = os.path.join(base, "cu13", "include")
        if all(os.path.exists(os.path.join(inc, h)) for h in names):
            text = ""
            for h in names:
                with open(os.path.join(inc, h), encoding="utf-8", errors="replace") as f:
                    text += f.read() + "\n"
            text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
            return re.sub(r"//[^\n]*", " ", text)
    return None


@pytest.fixture(scope="module")
def cublas_headers() -> str:
    text = _read(_CUBLAS)
    if text is None:
        pytest.skip("cublas_api.h (nvidia-cublas, the cu13 extra) is not installed")
    return text


@pytest.fixture(scope="module")
def cusolver_headers() -> str:
    text = _read(_CUBLAS + _CUSOLVER)
    if text is None:
        pytest.skip("cusolverDn.h (nvidia-cusolver, the cusolver extra) is not installed")
    return text


_ENUMS = [(cublas.Operation, "CUBLAS_OP_"), (cublas.FillMode, "CUBLAS_FILL_MODE_"),
          (cublas.SideMode, "CUBLAS_SIDE_"), (cublas.DiagType, "CUBLAS_DIAG_"),
          (cublas.PointerMode, "CUBLAS_POINTER_MODE_")]


@pytest.mark.parametrize("enum, prefix", _ENUMS, ids=[e.__name__ for e, _ in _ENUMS])
def test_enum_values_match_cublas_api_h(cublas_headers, enum, prefix):
    value = _constants(cublas_headers)
    wrong = {m.name: value(prefix + m.name) for m in enum if value(prefix + m.name) != int(m)}
    assert not wrong, wrong


@pytest.mark.parametrize("errors, headers", [(cublas.CublasError, "cublas_headers"),
                                             (cusolver.CusolverError, "cusolver_headers")])
def test_status_names_match_the_headers(request, errors, headers):
    value = _constants(request.getfixturevalue(headers))
    assert {n: value(n) for n in errors._names.values()} == {
        n: s for s, n in errors._names.items()}


_OPAQUE = {"cublasHandle_t", "cusolverDnHandle_t", "cusolverDnParams_t", "cudaStream_t"}
_WIDE = {"int64_t", "long long int", "long long", "size_t"}


def _kind(c_param: str) -> str:
    """'p' (pointer), 'w' (64-bit integer) or 'i' (int or enum) for a C parameter."""
    if "*" in c_param or "[" in c_param or any(t in c_param.split() for t in _OPAQUE):
        return "p"
    words = c_param.replace("const", " ").split()
    base = " ".join(words[:-1])
    return "w" if base in _WIDE else "i"


def _declared_kind(argtype) -> str:
    if argtype in (ctypes.c_void_p, ctypes.c_char_p):
        return "p"
    return "w" if ctypes.sizeof(argtype) == 8 else "i"


def _check(headers, name, argtypes):
    params = _prototype(headers, name)
    assert len(argtypes) == len(params), (params, argtypes)
    for i, (c_param, declared) in enumerate(zip(params, argtypes)):
        assert _kind(c_param) == _declared_kind(declared), (i, c_param, declared)


@pytest.mark.parametrize("name", sorted(cublas._SIGNATURES))
def test_cublas_functions_take_the_headers_arguments(cublas_headers, name):
    _check(cublas_headers, name, cublas._SIGNATURES[name])


@pytest.mark.parametrize("name", sorted(cusolver._SIGNATURES))
def test_cusolver_functions_take_the_headers_arguments(cusolver_headers, name):
    _check(cusolver_headers, name, cusolver._SIGNATURES[name])
