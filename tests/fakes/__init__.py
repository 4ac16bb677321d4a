"""The recording fakes of the native layers, one package for every engine's tests.

- :mod:`tests.fakes.cublaslt`: cuBLASLt, the CUDA runtime helpers and a fake torch (``gpu``).
- :mod:`tests.fakes.cufft`: cuFFT, the CUDA runtime helpers, torch CPU tensors posing as CUDA
  ones (``fake_cuda``).
"""
