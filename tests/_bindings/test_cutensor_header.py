"""The hand-written ctypes declarations of ``cuweave._bindings.cutensor`` against ``cutensor.h``.

The header ships in the ``cutensor-cu13`` wheel (the ``tensor`` extra, ``cutensor/include``);
without it these tests skip. No compiler is needed: the header is read as text. Every enum
member declared must equal the header's enumerator, every declared function must take as many
arguments as its prototype (pointers where it has pointers, 64-bit integers where it has them),
and every compute descriptor must be an exported symbol of the header.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys

import pytest

from cuweave._bindings import cutensor as ct


def _include_dir() -> str | None:
    for entry in sys.path:
        inc = os.path.join(entry or ".", "cutensor", "include")
        if os.path.exists(os.path.join(inc, "cutensor.h")):
            return inc
    return None


@pytest.fixture(scope="module")
def header() -> str:
    inc = _include_dir()
    if inc is None:
        pytest.skip("cutensor.h (the cutensor-cu13 wheel, the tensor extra) is not installed")
    text = ""
    for name in ("cutensor/types.h", "cutensor.h"):
        with open(os.path.join(inc, name), encoding="utf-8", errors="replace") as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _enumerators(text: str) -> dict:
    values = {}
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
        for item in body.split(","):
            m = re.match(r"\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)\s*$", item)
            if m:
                values[m.group(1)] = int(m.group(2))
    return values


_ENUMS = [
    (ct.Status, "CUTENSOR_STATUS_"),
    (ct.Operator, "CUTENSOR_"),
    (ct.Algo, "CUTENSOR_ALGO_"),
    (ct.WorksizePreference, "CUTENSOR_"),
    (ct.OperationDescriptorAttribute, "CUTENSOR_OPERATION_DESCRIPTOR_"),
    (ct.PlanPreferenceAttribute, "CUTENSOR_PLAN_PREFERENCE_"),
    (ct.AutotuneMode, "CUTENSOR_AUTOTUNE_MODE_"),
    (ct.JitMode, "CUTENSOR_JIT_MODE_"),
    (ct.CacheMode, "CUTENSOR_CACHE_MODE_"),
    (ct.PlanAttribute, "CUTENSOR_PLAN_"),
]


@pytest.mark.parametrize("enum, prefix", _ENUMS, ids=[e.__name__ for e, _ in _ENUMS])
def test_enum_values_match_the_header(header, enum, prefix):
    values = _enumerators(header)
    wrong = {}
    for member in enum:
        c_name = prefix + member.name
        if c_name not in values:
            wrong[member.name] = f"{c_name} is not in the header"
        elif values[c_name] != int(member):
            wrong[member.name] = f"{c_name} = {values[c_name]}, declared {int(member)}"
    assert not wrong, wrong


def test_compute_descriptors_are_exported(header):
    exported = set(re.findall(r"cutensorComputeDescriptor_t\s+(CUTENSOR_COMPUTE_DESC_\w+)\s*;",
                              header))
    assert {"CUTENSOR_COMPUTE_DESC_" + n for n in ct.COMPUTE_DESCRIPTORS} == exported


_POINTER_TYPES = {"cutensorHandle_t", "cutensorTensorDescriptor_t", "cutensorPlan_t",
                  "cutensorOperationDescriptor_t", "cutensorPlanPreference_t",
                  "cutensorComputeDescriptor_t", "cudaStream_t"}


def _prototype(text: str, name: str) -> list:
    m = re.search(r"\b" + name + r"\s*\(([^()]*)\)\s*;", text)
    assert m, f"{name} is not declared in the header"
    params = [p.strip() for p in m.group(1).split(",")]
    return [] if params in ([""], ["void"]) else params


def _kind(c_param: str) -> str:
    if "*" in c_param or "[" in c_param or any(t in c_param.split() for t in _POINTER_TYPES):
        return "pointer"
    if "uint64_t" in c_param or "size_t" in c_param:
        return "int64"
    return "int32"


def _declared_kind(argtype) -> str:
    if argtype in (ctypes.c_void_p, ctypes.c_char_p) or (
            hasattr(argtype, "_type_") and isinstance(argtype._type_, type)):
        return "pointer"
    return "int64" if ctypes.sizeof(argtype) == 8 else "int32"


@pytest.mark.parametrize("name", sorted(ct._SIGNATURES))
def test_functions_take_the_headers_arguments(header, name):
    params = _prototype(header, name)
    argtypes = ct._SIGNATURES[name][1]
    assert len(argtypes) == len(params), (params, argtypes)
    for i, (c_param, declared) in enumerate(zip(params, argtypes)):
        assert _kind(c_param) == _declared_kind(declared), (i, c_param, declared)


def test_library_loads_from_the_environment_variable(monkeypatch, tmp_path):
    """CUWEAVE_CUTENSOR_PATH is tried first; a wrong path names the variable and the extra."""
    monkeypatch.setattr(ct, "_state", {})
    monkeypatch.setenv(ct.ENV_PATH, str(tmp_path / "missing.so"))
    with pytest.raises(ImportError, match="CUWEAVE_CUTENSOR_PATH.*|tensor"):
        ct.library()
