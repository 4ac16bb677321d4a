"""The epilog table: enum values, name parsing, inputs/outputs, aux layouts and dtype rules."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave._internal.errors import InvalidOperandError, InvalidOptionError
from cuweave.linalg.advanced._epilogs import (
    EPILOGS,
    EpilogSpec,
    MatmulEpilog,
    aux_dtype,
    aux_layout,
    aux_outputs,
    bias_dtype,
    epilog_spec,
    required_inputs,
    validate_epilog,
    validate_epilog_inputs,
)

# cublasLtEpilogue_t as written in the CUDA 13 cublasLt.h (checked against the header)
HEADER_VALUES = {
    "DEFAULT": 1, "RELU": 2, "RELU_AUX": 2 | 128, "BIAS": 4, "RELU_BIAS": 2 | 4,
    "RELU_AUX_BIAS": 2 | 128 | 4, "DRELU": 8 | 128, "DRELU_BGRAD": 8 | 128 | 16, "GELU": 32,
    "GELU_AUX": 32 | 128, "GELU_BIAS": 32 | 4, "GELU_AUX_BIAS": 32 | 128 | 4,
    "DGELU": 64 | 128, "DGELU_BGRAD": 64 | 128 | 16, "BGRADA": 256, "BGRADB": 512,
}

# API.md's table: epilog -> (epilog_inputs keys, aux keys)
API_TABLE = {
    "DEFAULT": ((), ()), "RELU": ((), ()), "GELU": ((), ()),
    "BIAS": (("bias",), ()), "RELU_BIAS": (("bias",), ()), "GELU_BIAS": (("bias",), ()),
    "RELU_AUX": ((), ("relu_aux",)), "RELU_AUX_BIAS": (("bias",), ("relu_aux",)),
    "GELU_AUX": ((), ("gelu_aux",)), "GELU_AUX_BIAS": (("bias",), ("gelu_aux",)),
    "DRELU": (("relu_aux",), ()), "DGELU": (("gelu_aux",), ()),
    "DRELU_BGRAD": (("relu_aux",), ("drelu_bgrad",)),
    "DGELU_BGRAD": (("gelu_aux",), ("dgelu_bgrad",)),
    "BGRADA": ((), ("bgrada",)), "BGRADB": ((), ("bgradb",)),
}


def test_enum_values_match_header():
    assert {e.name: int(e) for e in MatmulEpilog} == HEADER_VALUES


def test_table_covers_every_epilog_once():
    assert set(EPILOGS) == set(MatmulEpilog)
    for epilog, spec in EPILOGS.items():
        assert isinstance(spec, EpilogSpec) and spec.epilog is epilog


@pytest.mark.parametrize("name", sorted(API_TABLE))
def test_inputs_and_outputs_follow_api_table(name):
    inputs, outputs = API_TABLE[name]
    assert required_inputs(name) == inputs
    assert aux_outputs(name) == outputs


@pytest.mark.parametrize("value", ["relu_bias", "RELU_BIAS", " Relu_Bias ", 6,
                                   MatmulEpilog.RELU_BIAS, "CUBLASLT_EPILOGUE_RELU_BIAS"])
def test_epilog_spec_accepts_spellings(value):
    assert epilog_spec(value).epilog is MatmulEpilog.RELU_BIAS


def test_epilog_spec_none_is_default_and_spec_passes_through():
    spec = epilog_spec(None)
    assert spec.epilog is MatmulEpilog.DEFAULT
    assert epilog_spec(spec) is spec


@pytest.mark.parametrize("value", ["relu_gelu", 3, 7.0, True, object()])
def test_epilog_spec_rejects_unknown(value):
    with pytest.raises(InvalidOptionError, match=r"epilog must be one of \[.*RELU_BIAS.*\], got"):
        epilog_spec(value)


def test_epilog_spec_uses_parameter_name():
    with pytest.raises(InvalidOptionError, match="^preferences.epilog must be"):
        epilog_spec("nope", name="preferences.epilog")


def test_cpu_kernels_resolve():
    for spec in EPILOGS.values():
        assert callable(spec.cpu)
        assert spec.cpu.__name__ == f"act_{spec.activation or 'identity'}"


def test_bgrad_sources():
    sources = {s.name: s.bgrad_source for s in EPILOGS.values() if s.bgrad_output}
    assert sources == {"DRELU_BGRAD": "d", "DGELU_BGRAD": "d", "BGRADA": "a", "BGRADB": "b"}


def test_validate_epilog_inputs():
    assert validate_epilog_inputs("relu_bias", {"bias": 1}) == {"bias": 1}
    assert validate_epilog_inputs("relu", None) == {}
    with pytest.raises(InvalidOperandError, match=r"epilog_inputs must have the keys \['bias'\]"):
        validate_epilog_inputs("bias", {})
    with pytest.raises(InvalidOperandError, match="relu_aux"):
        validate_epilog_inputs("drelu", {"gelu_aux": 1})
    with pytest.raises(InvalidOperandError):
        validate_epilog_inputs("relu", {"bias": 1})


@pytest.mark.parametrize("spec", list(EPILOGS.values()), ids=lambda s: s.name)
def test_complex_only_with_default(spec):
    for dtype in ("complex64", "complex128"):
        if spec.epilog is MatmulEpilog.DEFAULT:
            assert validate_epilog(spec, dtype=dtype) is spec
        else:
            with pytest.raises(InvalidOperandError, match="dtype must be real"):
                validate_epilog(spec, dtype=dtype)
    assert validate_epilog(spec, dtype="float32") is spec


def test_validate_epilog_versions_and_k():
    validate_epilog("drelu", dtype="float32", k=1)  # no version: the CPU has no k restriction
    with pytest.raises(InvalidOperandError, match="k must be >= 2"):
        validate_epilog("drelu", dtype="float32", k=1, version=130100)
    with pytest.raises(InvalidOptionError, match="needs cuBLASLt >= 111103"):
        validate_epilog("bgrada", dtype="float32", version=11703)
    with pytest.raises(InvalidOptionError, match="batched RELU_AUX needs cuBLASLt >= 11703"):
        validate_epilog("relu_aux", dtype="float32", batched=True, version=11601)
    validate_epilog("relu_aux", dtype="float32", batched=False, version=11601)


@pytest.mark.parametrize("m", [1, 8, 127, 128, 129, 300])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_relu_aux_layout(m, batch):
    n = 5
    shape, strides, dtype = aux_layout("relu_aux", m, n, batch, "float16")
    ld = -(-m // 128) * 16
    assert shape == (*batch, ld, n) and dtype == "uint8"
    assert strides[-2:] == (1, ld)
    if batch:
        assert strides[-3] == ld * n
        assert strides[0] == ld * n * int(np.prod(batch[1:]))


@pytest.mark.parametrize("m", [1, 7, 8, 9, 64])
def test_gelu_aux_layout(m):
    shape, strides, dtype = aux_layout("gelu_aux", m, 3, (2,), "bfloat16")
    rows = -(-m // 8) * 8
    assert shape == (2, rows, 3) and strides == (rows * 3, 1, rows) and dtype == "bfloat16"


@pytest.mark.parametrize("name,length", [("drelu_bgrad", 6), ("dgelu_bgrad", 6),
                                         ("bgrada", 6), ("bgradb", 4)])
def test_bgrad_layout(name, length):
    assert aux_layout(name, 6, 4, (), "float32") == ((length,), (1,), "float32")
    assert aux_layout(name, 6, 4, (2, 3), "float16") == (
        (2, 3, length, 1), (3 * length, length, 1, length), "float16")


def test_dtype_rules():
    assert bias_dtype("float16") == "float16"
    assert bias_dtype("float32", ab_dtype="float8_e4m3fn") == "bfloat16"
    assert bias_dtype("float8_e4m3fn", ab_dtype="float8_e4m3fn") == "float16"
    assert bias_dtype("float8_e4m3fn", ab_dtype="float8_e4m3fn", c_dtype="bfloat16") == "bfloat16"
    assert aux_dtype("relu_aux", "float64") == "uint8"
    assert aux_dtype("gelu_aux", "bfloat16") == "bfloat16"
    assert aux_dtype("gelu_aux", "float8_e4m3fn", c_dtype="bfloat16") == "bfloat16"
    assert aux_dtype("bgradb", "float32") == "float32"
    with pytest.raises(InvalidOptionError, match="aux name must be one of"):
        aux_dtype("bias", "float32")
