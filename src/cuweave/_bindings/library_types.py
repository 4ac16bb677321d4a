"""Enums shared by the CUDA math libraries (``library_types.h``, ``cublas_api.h``).

Values are the C values of the CUDA 13 headers.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["CudaDataType", "ComputeType", "DATA_TYPE"]


class CudaDataType(IntEnum):
    """``cudaDataType_t``."""

    CUDA_R_16F = 2
    CUDA_C_16F = 6
    CUDA_R_16BF = 14
    CUDA_C_16BF = 15
    CUDA_R_32F = 0
    CUDA_C_32F = 4
    CUDA_R_64F = 1
    CUDA_C_64F = 5
    CUDA_R_4I = 16
    CUDA_C_4I = 17
    CUDA_R_4U = 18
    CUDA_C_4U = 19
    CUDA_R_8I = 3
    CUDA_C_8I = 7
    CUDA_R_8U = 8
    CUDA_C_8U = 9
    CUDA_R_16I = 20
    CUDA_C_16I = 21
    CUDA_R_16U = 22
    CUDA_C_16U = 23
    CUDA_R_32I = 10
    CUDA_C_32I = 11
    CUDA_R_32U = 12
    CUDA_C_32U = 13
    CUDA_R_64I = 24
    CUDA_C_64I = 25
    CUDA_R_64U = 26
    CUDA_C_64U = 27
    CUDA_R_8F_E4M3 = 28
    CUDA_R_8F_E5M2 = 29
    CUDA_R_8F_UE8M0 = 30
    CUDA_R_6F_E2M3 = 31
    CUDA_R_6F_E3M2 = 32
    CUDA_R_4F_E2M1 = 33


class ComputeType(IntEnum):
    """``cublasComputeType_t``."""

    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77
    COMPUTE_32F_EMULATED_16BFX9 = 78
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_64F_EMULATED_FIXEDPOINT = 79
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73


#: cuweave's canonical dtype names -> ``cudaDataType_t`` (the one map; see _internal.dtypes)
DATA_TYPE = {
    "float16": CudaDataType.CUDA_R_16F,
    "bfloat16": CudaDataType.CUDA_R_16BF,
    "float32": CudaDataType.CUDA_R_32F,
    "float64": CudaDataType.CUDA_R_64F,
    "complex32": CudaDataType.CUDA_C_16F,
    "complex64": CudaDataType.CUDA_C_32F,
    "complex128": CudaDataType.CUDA_C_64F,
    "float8_e4m3fn": CudaDataType.CUDA_R_8F_E4M3,
    "float8_e5m2": CudaDataType.CUDA_R_8F_E5M2,
    "int8": CudaDataType.CUDA_R_8I,
    "uint8": CudaDataType.CUDA_R_8U,
    "int32": CudaDataType.CUDA_R_32I,
}
