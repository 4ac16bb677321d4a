"""CPU tests of cuweave.device.random: the cuRAND shim compiles (NVRTC), kernels calling every
function type-check, lower and *link* with nvJitLink for sm_90, host helpers, and cuRAND's host
generator agrees with an independent Philox4x32-10 / Sobol reference (the chain the GPU tests
close: device == host generator).
"""

from __future__ import annotations

import ctypes
import types as pytypes

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
pytest.importorskip("nvidia.mathdx", reason="nvidia-mathdx (the 'dx' extra) is not installed")

from cuweave._internal.errors import InvalidOptionError, LibraryNotFoundError  # noqa: E402


@pytest.fixture(scope="module")
def random_module():
    from cuweave.device import ComputeCapability
    from cuweave.device import _random_codegen as gen

    try:
        gen.curand_include()
        from cuweave.device import random
    except (LibraryNotFoundError, ImportError) as e:
        pytest.skip(f"optional package missing: {e}")
    random.Compile(ComputeCapability(9, 0))
    return random


@pytest.fixture
def link_kernel(monkeypatch, random_module):
    """Compile a kernel for sm_90 to LTO-IR and link it with the cuRAND shim (nvJitLink)."""
    from numba import cuda
    from numba.cuda import dispatcher

    from cuweave.device import _random_codegen as gen

    monkeypatch.setattr(dispatcher, "get_current_device",
                        lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")

    def run(pyfunc, sig):
        ir, _ = cuda.compile(pyfunc, sig, cc=(9, 0), output="ltoir")
        handle = nvjitlink.create(2, ["-arch=sm_90", "-lto"])
        try:
            shim = gen.compiled(900)["ltoir"]
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, ir, len(ir), "kernel")
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, shim, len(shim), "curand")
            nvjitlink.complete(handle)
            return nvjitlink.get_linked_cubin_size(handle)
        finally:
            nvjitlink.destroy(handle)

    return run


def _states_array_type(random, generator):
    from numba.cuda import types
    from numba.np.numpy_support import from_dtype

    return types.Array(from_dtype(random.state_dtype(generator)), 1, "C")


def test_every_function_compiles_and_links(random_module, link_kernel):
    from numba import cuda
    from numba.cuda import types

    random = random_module

    def kernel(ph, xw, mrg, sob32, ssob64, dv32, dv64, f32, f64, u64):
        i = cuda.grid(1)
        random.init(1234, i, 0, ph[i])
        random.init(1234, i, 0, xw[i])
        random.init(1234, i, 0, mrg[i])
        random.init(dv32[i], 0, sob32[i])
        random.init(dv64[i], 99, 0, ssob64[i])
        f32[i] = (random.uniform(ph[i]) + random.normal(xw[i]) + random.log_normal(mrg[i], 0, 1)
                  + random.uniform4(ph[i]).w + random.normal4(ph[i]).x
                  + random.normal2(mrg[i]).y + random.log_normal2(xw[i], 0.0, 1.0).x
                  + random.log_normal4(ph[i], 0.0, 1.0).z + random.uniform(sob32[i]))
        f64[i] = (random.uniform_double(ph[i]) + random.normal_double(mrg[i])
                  + random.uniform2_double(ph[i]).y + random.normal2_double(xw[i]).x
                  + random.log_normal_double(ssob64[i], 0.0, 1.0)
                  + random.log_normal2_double(mrg[i], 0.0, 1.0).y)
        u64[i] = (random.rand(ph[i]) + random.rand4(ph[i]).x + random.poisson(xw[i], 3.0)
                  + random.poisson4(ph[i], 2.0).w + random.rand(sob32[i])
                  + random.rand(ssob64[i]))
        random.skipahead(5, ph[i])
        random.skipahead_sequence(1, xw[i])
        random.skipahead_subsequence(1, mrg[i])

    sig = tuple(_states_array_type(random, g) for g in
                ("Philox4_32_10", "XORWOW", "MRG32k3a", "Sobol32", "ScrambledSobol64")) + (
        types.uint32[:, :], types.uint64[:, :], types.float32[:], types.float64[:],
        types.uint64[:])
    assert link_kernel(kernel, sig) > 10_000


def test_wrong_generator_is_a_clear_error(random_module, link_kernel):
    from numba.cuda import types

    random = random_module

    def kernel(xw, out):
        out[0] = random.normal4(xw[0]).x

    with pytest.raises(Exception, match="normal4 must be called with a state of Philox4_32_10"):
        link_kernel(kernel, (_states_array_type(random, "XORWOW"), types.float32[:]))


def test_state_layouts_and_errors(random_module):
    random = random_module
    sizes = {g: random.state_dtype(g).itemsize for g in
             ("XORWOW", "MRG32k3a", "Philox4_32_10", "Sobol32", "Sobol64")}
    assert sizes["Philox4_32_10"] % 16 == 0 and sizes["Sobol64"] > sizes["Sobol32"] >= 32 * 4
    with pytest.raises(InvalidOptionError, match="generator must be"):
        random.state_dtype("Mersenne")
    c = random.Compile()
    assert c.files == [] and c.extension == [] and c.cc == 900
    with pytest.raises(RuntimeError, match="inside"):
        random.uniform(None)


def test_direction_vectors_and_scramble_constants(random_module):
    from cuweave.device import random_helpers as rh

    v32 = rh.get_direction_vectors32(rh.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 3)
    assert v32.shape == (3, 32) and v32.dtype == np.uint32
    assert v32[0].tolist() == [1 << (31 - k) for k in range(32)]  # dimension 1: van der Corput
    v64 = rh.get_direction_vectors64(rh.DirectionVectorSet.SCRAMBLED_DIRECTION_VECTORS_64_JOEKUO6,
                                     2)
    assert v64.shape == (2, 64) and v64.dtype == np.uint64
    assert rh.get_scramble_constants32(5).shape == (5,)
    assert rh.get_scramble_constants64(2).dtype == np.uint64
    with pytest.raises(InvalidOptionError, match="n must be"):
        rh.get_scramble_constants32(0)
    with pytest.raises(InvalidOptionError, match="64-bit"):
        rh.get_direction_vectors64(rh.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 1)


# --- an independent reference: Philox4x32-10 (Salmon et al., SC'11) with cuRAND's seeding ---

_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox4x32_10(counter, key):
    c, (k0, k1) = [int(v) for v in counter], key
    for _ in range(10):
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k1, p0 & 0xFFFFFFFF]
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return c


def philox_first_block(seed, subsequences):
    """``curand()`` x4 of ``curand_init(seed, t, 0)`` for every subsequence ``t``."""
    key = (seed & 0xFFFFFFFF, seed >> 32)
    return np.array([philox4x32_10((0, 0, t & 0xFFFFFFFF, t >> 32), key)
                     for t in range(subsequences)], dtype=np.uint32).ravel()


def host_generate(rng_type, n, seed=None, dimensions=None, kind="bits"):
    """cuRAND's host generator (runs on the CPU)."""
    from cuweave.device import random_helpers as rh

    lib = rh.libcurand()
    gen = ctypes.c_void_p()
    assert lib.curandCreateGeneratorHost(ctypes.byref(gen), rng_type) == 0
    try:
        if seed is not None:
            assert lib.curandSetPseudoRandomGeneratorSeed(gen, ctypes.c_ulonglong(seed)) == 0
        if dimensions is not None:
            assert lib.curandSetQuasiRandomGeneratorDimensions(gen, dimensions) == 0
        dtype = {"bits": np.uint32, "uniform": np.float32}[kind]
        out = np.zeros(n, dtype)
        fn = {"bits": lib.curandGenerate, "uniform": lib.curandGenerateUniform}[kind]
        assert fn(gen, out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n)) == 0
        return out
    finally:
        lib.curandDestroyGenerator(gen)


PHILOX, SOBOL32 = 161, 201


def test_host_philox_matches_the_reference_layout(random_module):
    """cuRAND's host Philox output (65536 values) is subsequence ``k // 4``, element ``k % 4``
    of its first block -- the layout the GPU test reproduces with ``init(seed, t, 0)``."""
    host = host_generate(PHILOX, 1 << 16, seed=1234)
    np.testing.assert_array_equal(host[:4096], philox_first_block(1234, 1024))


def test_host_sobol32_is_the_gray_code_sequence(random_module):
    from cuweave.device import random_helpers as rh

    v = rh.get_direction_vectors32(rh.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 1)[0]
    x, ref = 0, []
    for i in range(256):
        ref.append(x)
        x ^= int(v[(~i & (i + 1)).bit_length() - 1])
    np.testing.assert_array_equal(host_generate(SOBOL32, 256, dimensions=1), ref)
