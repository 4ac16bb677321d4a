"""GPU tests of cuweave.device.random: bit-exact against cuRAND's host generator (Philox4_32_10,
Sobol32), exact skip-ahead identities, and the moments of every distribution."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

PSEUDO = ("XORWOW", "MRG32k3a", "Philox4_32_10")


@pytest.fixture(scope="module")
def random():
    from cuweave.device import random

    random.Compile()
    return random


def test_philox_bits_and_uniforms_match_the_host_generator(random):
    from numba import cuda

    from .test_random import PHILOX, host_generate

    threads = 1 << 14

    @cuda.jit
    def kernel(states, bits, uniforms):
        t = cuda.grid(1)
        if t < states.shape[0]:
            random.init(1234, t, 0, states[t])
            for j in range(4):
                bits[4 * t + j] = random.rand(states[t])
            random.init(1234, t, 0, states[t])
            for j in range(4):
                uniforms[4 * t + j] = random.uniform(states[t])

    states = random.StatesPhilox4_32_10(threads)
    bits = cuda.device_array(4 * threads, np.uint32)
    uniforms = cuda.device_array(4 * threads, np.float32)
    kernel[threads // 128, 128](states, bits, uniforms)
    np.testing.assert_array_equal(bits.copy_to_host(), host_generate(PHILOX, 4 * threads,
                                                                     seed=1234))
    np.testing.assert_array_max_ulp(
        uniforms.copy_to_host(), host_generate(PHILOX, 4 * threads, seed=1234, kind="uniform"),
        maxulp=1)


def test_sobol32_matches_the_host_generator(random):
    from numba import cuda

    from cuweave.device import random_helpers as rh

    from .test_random import SOBOL32, host_generate

    threads, per_thread = 256, 16
    vectors = cuda.to_device(
        rh.get_direction_vectors32(rh.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 1))

    @cuda.jit
    def kernel(states, vectors, out):
        t = cuda.grid(1)
        if t < states.shape[0]:
            random.init(vectors[0], t * per_thread, states[t])
            for j in range(per_thread):
                out[t * per_thread + j] = random.rand(states[t])

    out = cuda.device_array(threads * per_thread, np.uint32)
    kernel[threads // 64, 64](random.StatesSobol32(threads), vectors, out)
    np.testing.assert_array_equal(out.copy_to_host(),
                                  host_generate(SOBOL32, threads * per_thread, dimensions=1))


@pytest.mark.parametrize("generator", PSEUDO)
def test_skipahead_identities(random, generator):
    """``skipahead(5)`` == five draws; ``init(seed, 1, 0)`` == ``init(seed, 0, 0)`` skipped one
    (sub)sequence ahead."""
    from numba import cuda

    states = getattr(random, f"States{generator}")(4)
    # MRG32k3a's subsequence is what its init skips; the others skip whole sequences
    skip = random.skipahead_subsequence if generator == "MRG32k3a" else random.skipahead_sequence

    @cuda.jit
    def kernel(states, out):
        random.init(7, 0, 0, states[0])
        for j in range(10):
            out[0, j] = random.rand(states[0])
        random.init(7, 0, 0, states[1])
        random.skipahead(5, states[1])
        for j in range(5):
            out[1, j] = random.rand(states[1])
        random.init(7, 1, 0, states[2])
        random.init(7, 0, 0, states[3])
        skip(1, states[3])
        for j in range(10):
            out[2, j] = random.rand(states[2])
            out[3, j] = random.rand(states[3])

    out = cuda.to_device(np.zeros((4, 10), np.uint32))
    kernel[1, 1](states, out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[1, :5], got[0, 5:])
    np.testing.assert_array_equal(got[2], got[3])
    assert not np.array_equal(got[0], got[2])


PER_THREAD = 16


def _moments_kernel(random):
    from numba import cuda

    @cuda.jit
    def kernel(states, u, ud, n, nd, n2, ln, p):
        t = cuda.grid(1)
        if t >= states.shape[0]:
            return
        random.init(2024, t, 0, states[t])
        for j in range(PER_THREAD):
            k = t * PER_THREAD + j
            u[k] = random.uniform(states[t])
            ud[k] = random.uniform_double(states[t])
            n[k] = random.normal(states[t])
            nd[k] = random.normal_double(states[t])
            pair = random.normal2(states[t])
            n2[2 * k], n2[2 * k + 1] = pair.x, pair.y
            ln[k] = random.log_normal(states[t], 1.0, 0.5)
            p[k] = random.poisson(states[t], 4.0)

    return kernel


@pytest.mark.parametrize("generator", PSEUDO)
def test_distribution_moments(random, generator):
    from numba import cuda

    threads = 4096
    m = threads * PER_THREAD
    arrays = [cuda.device_array(m, np.float32), cuda.device_array(m, np.float64),
              cuda.device_array(m, np.float32), cuda.device_array(m, np.float64),
              cuda.device_array(2 * m, np.float32), cuda.device_array(m, np.float32),
              cuda.device_array(m, np.uint32)]
    _moments_kernel(random)[threads // 128, 128](getattr(random, f"States{generator}")(threads),
                                                 *arrays)
    u, ud, n, nd, n2, ln, p = (a.copy_to_host() for a in arrays)
    for x in (u, ud):
        assert x.min() > 0 and x.max() <= 1
        assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.005
    for x in (n, nd, n2):
        assert abs(x.mean()) < 0.02 and abs(x.std() - 1) < 0.02
    assert abs(np.log(ln).mean() - 1.0) < 0.02 and abs(np.log(ln).std() - 0.5) < 0.01
    assert abs(p.mean() - 4.0) < 0.05 and abs(p.var() - 4.0) < 0.2


def test_philox_vector_forms(random):
    from numba import cuda

    threads = 4096

    @cuda.jit
    def kernel(states, n4, u4, ud2, ln4, p4, b4):
        t = cuda.grid(1)
        if t >= states.shape[0]:
            return
        random.init(99, t, 0, states[t])
        for j in range(PER_THREAD):
            k = 4 * (t * PER_THREAD + j)
            q, w, r, c = (random.normal4(states[t]), random.uniform4(states[t]),
                          random.log_normal4(states[t], 0.0, 1.0),
                          random.poisson4(states[t], 2.0))
            n4[k], n4[k + 1], n4[k + 2], n4[k + 3] = q.x, q.y, q.z, q.w
            u4[k], u4[k + 1], u4[k + 2], u4[k + 3] = w.x, w.y, w.z, w.w
            ln4[k], ln4[k + 1], ln4[k + 2], ln4[k + 3] = r.x, r.y, r.z, r.w
            p4[k], p4[k + 1], p4[k + 2], p4[k + 3] = c.x, c.y, c.z, c.w
            d = random.uniform2_double(states[t])
            ud2[k // 2], ud2[k // 2 + 1] = d.x, d.y
            b = random.rand4(states[t])
            b4[k], b4[k + 1], b4[k + 2], b4[k + 3] = b.x, b.y, b.z, b.w

    m = 4 * threads * PER_THREAD
    arrays = [cuda.device_array(m, np.float32), cuda.device_array(m, np.float32),
              cuda.device_array(m // 2, np.float64), cuda.device_array(m, np.float32),
              cuda.device_array(m, np.uint32), cuda.device_array(m, np.uint32)]
    kernel[threads // 128, 128](random.StatesPhilox4_32_10(threads), *arrays)
    n4, u4, ud2, ln4, p4, b4 = (a.copy_to_host() for a in arrays)
    assert abs(n4.mean()) < 0.02 and abs(n4.std() - 1) < 0.02
    for x in (u4, ud2):
        assert x.min() > 0 and x.max() <= 1 and abs(x.mean() - 0.5) < 0.01
    assert abs(np.log(ln4).mean()) < 0.02 and abs(np.log(ln4).std() - 1) < 0.02
    assert abs(p4.mean() - 2.0) < 0.05
    assert abs(b4.astype(np.float64).mean() / 2**32 - 0.5) < 0.01 and len(np.unique(b4)) > m * 0.99


def test_scrambled_sobol64_uniforms(random):
    from numba import cuda

    from cuweave.device import random_helpers as rh

    threads, per_thread = 512, 32
    sets = rh.DirectionVectorSet.SCRAMBLED_DIRECTION_VECTORS_64_JOEKUO6
    vectors = cuda.to_device(rh.get_direction_vectors64(sets, 1))
    constants = cuda.to_device(rh.get_scramble_constants64(1))

    @cuda.jit
    def kernel(states, vectors, constants, out):
        t = cuda.grid(1)
        if t < states.shape[0]:
            random.init(vectors[0], constants[0], t * per_thread, states[t])
            for j in range(per_thread):
                out[t * per_thread + j] = random.uniform_double(states[t])

    out = cuda.device_array(threads * per_thread, np.float64)
    kernel[threads // 64, 64](random.StatesScrambledSobol64(threads), vectors, constants, out)
    x = out.copy_to_host()
    assert x.min() > 0 and x.max() <= 1 and len(np.unique(x)) == x.size
    # a low-discrepancy sequence: every one of 64 equal bins holds exactly 1/64 of the points
    counts = np.histogram(x, bins=64, range=(0, 1))[0]
    assert counts.min() >= x.size // 64 - 1 and counts.max() <= x.size // 64 + 1
