"""The hand-written ctypes declarations of ``cuweave._bindings`` against the CUDA 13 headers.

The headers ship in the NVIDIA wheels of the ``cu13`` extra (``nvidia/cu13/include``); without
them these tests skip. No compiler is needed: the headers are read as text. Every enum member
declared here must equal the header's enumerator (values are evaluated from the header's own
expressions), the two structures must have the header's fields, offsets and size, and every
declared function must take as many arguments as its prototype, pointers where it has pointers.
"""

from __future__ import annotations

import ctypes
import os
import re

import pytest

from cuweave._bindings import cublaslt as lt
from cuweave._bindings import cufft
from cuweave._bindings.library_types import ComputeType, CudaDataType

_HEADERS = ("library_types.h", "cublas_api.h", "cublasLt.h", "cufft.h", "cufftXt.h")


def _include_dir() -> str | None:
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        inc = os.path.join(base, "cu13", "include")
        if all(os.path.exists(os.path.join(inc, h)) for h in _HEADERS):
            return inc
    return None


@pytest.fixture(scope="module")
def headers() -> str:
    inc = _include_dir()
    if inc is None:
        pytest.skip("the CUDA 13 headers (nvidia/cu13/include, the cu13 extra) are not installed")
    text = ""
    for h in _HEADERS:
        with open(os.path.join(inc, h), encoding="utf-8", errors="replace") as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _constants(text: str) -> dict:
    """Every enumerator and object-like macro of the headers, evaluated to an int."""
    exprs = {}
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
        for item in body.split(","):
            m = re.match(r"\s*([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*$", item, flags=re.S)
            if m:
                exprs[m.group(1)] = m.group(2)
    for name, expr in re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)[ \t]+([^\n]+)$", text,
                                 flags=re.M):
        exprs.setdefault(name, expr.strip())
    values: dict = {}

    def value(name, depth=0):
        if name in values:
            return values[name]
        expr = exprs[name]
        if expr is None:
            raise KeyError(name)  # implicit (previous + 1): not used by declared members
        src = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr)
        src = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|long long|uint64_t|int64_t)\s*\)", "", src)
        names = {n: value(n, depth + 1) for n in set(re.findall(r"(?<!\w)[A-Za-z_]\w*", src))}
        values[name] = int(eval(src, {"__builtins__": {}}, names))  # noqa: S307 - header text
        return values[name]

    return value


# (enum class, C prefix of its members); every member's C name is prefix + member name
_ENUMS = [
    (CudaDataType, ""),
    (ComputeType, "CUBLAS_"),
    (lt.Operation, "CUBLAS_OP_"),
    (lt.FillMode, "CUBLAS_FILL_MODE_"),
    (lt.PointerMode, "CUBLASLT_POINTER_MODE_"),
    (lt.Order, "CUBLASLT_ORDER_"),
    (lt.BatchMode, "CUBLASLT_BATCH_MODE_"),
    (lt.MatrixLayoutAttribute, "CUBLASLT_MATRIX_LAYOUT_"),
    (lt.MatmulDescAttribute, "CUBLASLT_MATMUL_DESC_"),
    (lt.Epilogue, "CUBLASLT_EPILOGUE_"),
    (lt.Search, "CUBLASLT_SEARCH_"),
    (lt.PreferenceAttribute, "CUBLASLT_MATMUL_PREF_"),
    (lt.ReductionScheme, "CUBLASLT_REDUCTION_SCHEME_"),
    (lt.AlgoCapAttribute, "CUBLASLT_ALGO_CAP_"),
    (lt.AlgoConfigAttribute, "CUBLASLT_ALGO_CONFIG_"),
    (lt.MatrixScaleMode, "CUBLASLT_MATMUL_MATRIX_SCALE_"),
    (lt.NumericalImplFlags, "CUBLASLT_NUMERICAL_IMPL_FLAGS_"),
    (cufft.CufftType, "CUFFT_"),
    (cufft.Direction, "CUFFT_"),
    (cufft.XtCallbackType, "CUFFT_CB_"),
    (cufft.WorkAreaPolicy, "CUFFT_WORKAREA_"),
]


@pytest.mark.parametrize("enum, prefix", _ENUMS, ids=[e.__name__ for e, _ in _ENUMS])
def test_enum_values_match_the_headers(headers, enum, prefix):
    value = _constants(headers)
    wrong = {}
    for member in enum:
        c_name = prefix + member.name
        try:
            got = value(c_name)
        except KeyError:
            wrong[member.name] = f"{c_name} is not in the headers"
            continue
        if got != int(member):
            wrong[member.name] = f"{c_name} = {got}, declared {int(member)}"
    assert not wrong, wrong


def _struct(text: str, name: str) -> list:
    """``[(type, field, count)]`` of ``typedef struct {...} name;`` in the headers."""
    m = re.search(r"typedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*" + name + r"\s*;", text)
    assert m, f"{name} is not in the headers"
    fields = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if decl:
            f = re.match(r"(.+?)\s+(\w+)\s*(?:\[(\d+)\])?$", decl)
            fields.append((f.group(1).strip(), f.group(2), int(f.group(3) or 1)))
    return fields


_C_TYPES = {"uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "int": ctypes.c_int,
            "float": ctypes.c_float, "cublasStatus_t": ctypes.c_int}


@pytest.mark.parametrize("declared, c_name", [(lt.MatmulAlgo, "cublasLtMatmulAlgo_t"),
                                              (lt.HeuristicResult,
                                               "cublasLtMatmulHeuristicResult_t")])
def test_structures_have_the_headers_layout(headers, declared, c_name):
    types = dict(_C_TYPES, cublasLtMatmulAlgo_t=lt.MatmulAlgo)
    fields = _struct(headers, c_name)

    class FromHeader(ctypes.Structure):
        _fields_ = [(f, types[t] * n if n > 1 else types[t]) for t, f, n in fields]

    assert ctypes.sizeof(declared) == ctypes.sizeof(FromHeader)
    assert [f for f, _ in declared._fields_] == [f for _, f, _ in fields]
    for f, _ in declared._fields_:
        assert getattr(declared, f).offset == getattr(FromHeader, f).offset, f
        assert getattr(declared, f).size == getattr(FromHeader, f).size, f


_OPAQUE_POINTERS = {"cublasLtHandle_t", "cublasLtMatmulDesc_t", "cublasLtMatrixLayout_t",
                    "cublasLtMatmulPreference_t", "cudaStream_t"}


def _prototype(text: str, name: str) -> list:
    """The parameters of function ``name`` in the headers, as declared (text)."""
    m = re.search(r"\b" + name + r"\s*\(([^()]*)\)\s*;", text)
    assert m, f"{name} is not declared in the headers"
    params = [p.strip() for p in m.group(1).split(",")]
    return [] if params == ["void"] else params


def _is_pointer(c_param: str) -> bool:
    return "*" in c_param or "[" in c_param or any(t in c_param.split()
                                                   for t in _OPAQUE_POINTERS)


def _declared_pointer(argtype) -> bool:
    return argtype in (ctypes.c_void_p, ctypes.c_char_p) or hasattr(argtype, "_type_") and \
        isinstance(argtype._type_, type)


_FUNCTIONS = ([(name, args) for name, (_, args) in lt._SIGNATURES.items()] +
              [(name, list(args)) for name, args in cufft._SIGNATURES.items()])


@pytest.mark.parametrize("name, argtypes", _FUNCTIONS, ids=[n for n, _ in _FUNCTIONS])
def test_functions_take_the_headers_arguments(headers, name, argtypes):
    params = _prototype(headers, name)
    assert len(argtypes) == len(params), (params, argtypes)
    for i, (c_param, declared) in enumerate(zip(params, argtypes)):
        assert _is_pointer(c_param) == _declared_pointer(declared), (i, c_param, declared)
