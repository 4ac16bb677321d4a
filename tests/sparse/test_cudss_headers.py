"""cuweave._bindings.cudss against the headers of the nvidia-cudss-cu13 wheel (the ``sparse``
extra): every enum member equals the header's enumerator and every declared function takes as
many arguments as its prototype, pointers where it has pointers. Skips without the wheel."""

from __future__ import annotations

import ctypes
import os
import re

import pytest

from cuweave._bindings import cudss


def _include_dir() -> str | None:
    try:
        import nvidia
    except ImportError:
        return None
    for base in nvidia.__path__:
        inc = os.path.join(base, "cu13", "include")
        if os.path.exists(os.path.join(inc, "cudss.h")):
            return inc
    return None


@pytest.fixture(scope="module")
def headers() -> str:
    inc = _include_dir()
    if inc is None:
        pytest.skip("the cuDSS headers (nvidia-cudss-cu13, the sparse extra) are not installed")
    text = ""
    for h in ("cudss_data_types.h", "cudss.h"):
        with open(os.path.join(inc, h), encoding="utf-8") as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _enumerators(text: str) -> dict:
    """Every enumerator of the headers with its value (implicit ones counted on)."""
    values: dict = {}
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
        nxt = 0
        for item in body.split(","):
            m = re.match(r"\s*([A-Za-z_]\w*)\s*(?:=\s*(.+?))?\s*$", item, flags=re.S)
            if not m:
                continue
            if m.group(2) is not None:
                expr = m.group(2)
                names = {n: values[n] for n in re.findall(r"[A-Za-z_]\w*", expr) if n in values}
                nxt = int(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - header text
            values[m.group(1)] = nxt
            nxt += 1
    return values


_ENUMS = [
    (cudss.Status, "CUDSS_STATUS_"), (cudss.ConfigParam, "CUDSS_CONFIG_"),
    (cudss.DataParam, "CUDSS_DATA_"), (cudss.Phase, "CUDSS_PHASE_"),
    (cudss.MatrixType, "CUDSS_MTYPE_"), (cudss.MatrixViewType, "CUDSS_MVIEW_"),
    (cudss.IndexBase, "CUDSS_BASE_"), (cudss.Layout, "CUDSS_LAYOUT_"),
    (cudss.ReorderingAlg, "CUDSS_REORDERING_ALG_"),
    (cudss.FactorizationAlg, "CUDSS_FACTORIZATION_ALG_"),
    (cudss.PivotEpsilonAlg, "CUDSS_PIVOT_EPSILON_ALG_"), (cudss.SolveAlg, "CUDSS_SOLVE_ALG_"),
    (cudss.MatchingAlg, "CUDSS_MATCHING_ALG_"), (cudss.PivotType, "CUDSS_"),
]


@pytest.mark.parametrize("enum, prefix", _ENUMS, ids=[e.__name__ for e, _ in _ENUMS])
def test_enum_values_match_the_headers(headers, enum, prefix):
    values = _enumerators(headers)
    wrong = {m.name: values.get(prefix + m.name) for m in enum
             if values.get(prefix + m.name) != int(m)}
    assert not wrong, wrong


def test_every_header_enumerator_is_declared(headers):
    values = _enumerators(headers)
    for enum, prefix in _ENUMS:
        pivots = enum is cudss.PivotType
        if pivots:
            prefix = "CUDSS_PIVOT_"
        names = {n for n in values if n.startswith(prefix)}
        declared = {prefix + (m.name.removeprefix("PIVOT_") if pivots else m.name) for m in enum}
        missing = names - declared - {"CUDSS_PIVOT_EPSILON_ALG_" + m.name
                                      for m in cudss.PivotEpsilonAlg}
        assert not missing, (enum.__name__, missing)


@pytest.mark.parametrize("name", sorted(cudss._SIGNATURES))
def test_prototypes_match(headers, name):
    m = re.search(r"cudssStatus_t\s+CUDSSAPI\s+" + name + r"\s*\((.*?)\)\s*;", headers, flags=re.S)
    assert m, f"{name} is not in cudss.h"
    params = [p.strip() for p in m.group(1).split(",") if p.strip() and p.strip() != "void"]
    declared = cudss._SIGNATURES[name]
    assert len(params) == len(declared), (params, declared)
    pointer_types = (ctypes.c_void_p, ctypes.c_char_p)
    for p, t in zip(params, declared):
        is_pointer = "*" in p or re.match(r"(const\s+)?cudss(Handle|Matrix|Data|Config)_t\b", p) \
            or p.startswith("cudaStream_t")
        declared_pointer = t in pointer_types or hasattr(t, "contents") or \
            getattr(t, "_type_", None) is not None and t.__name__.startswith("LP_")
        assert bool(is_pointer) == bool(declared_pointer), (name, p, t)


def test_config_types_cover_what_the_solver_sets():
    for p in (cudss.ConfigParam.REORDERING_ALG, cudss.ConfigParam.IR_N_STEPS,
              cudss.ConfigParam.PIVOT_EPSILON, cudss.ConfigParam.HYBRID_MEMORY_MODE,
              cudss.ConfigParam.HYBRID_DEVICE_MEMORY_LIMIT, cudss.ConfigParam.HOST_NTHREADS,
              cudss.ConfigParam.HYBRID_EXECUTE_MODE, cudss.ConfigParam.MAX_LU_NNZ):
        assert p in cudss.CONFIG_TYPES


@pytest.fixture(scope="module")
def library():
    try:
        cudss.load()
    except Exception as e:  # LibraryNotFoundError, or a dependency missing
        pytest.skip(f"libcudss cannot be loaded here: {e}")
    return cudss


def test_config_values_round_trip_with_their_c_types(library):
    """cuDSS config objects need no GPU: every value reads and writes back with its declared C
    type (cuDSS refuses a wrong size for the enum settings with CUDSS_STATUS_INVALID_VALUE)
    and the CPU engine's defaults are cuDSS's own."""
    from cuweave.sparse.advanced._configs import cpu_defaults

    config = library.config_create()
    try:
        defaults = cpu_defaults("float64")
        for param in library.CONFIG_TYPES:
            value = library.config_get(config, param)
            if param in defaults:  # the CPU engine starts from cuDSS's own defaults
                assert value == defaults[param], param
            if param == library.ConfigParam.HOST_NTHREADS:
                continue  # settable only with a threading layer
            library.config_set(config, param, value)
            assert library.config_get(config, param) == value
        library.config_set(config, library.ConfigParam.PIVOT_EPSILON, 1e-9)
        assert library.config_get(config, library.ConfigParam.PIVOT_EPSILON) == 1e-9
    finally:
        library.config_destroy(config)
