"""CuPy arrays on the GPU: plan, autotune, execute on CuPy's stream, persist the winner.

The result is a ``cupy.ndarray`` allocated from CuPy's memory pool. Needs CuPy and a GPU
(prints why and exits cleanly otherwise).
"""

import sys

import numpy as np


def main():
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # no CuPy or no GPU
        print(f"skipped: needs CuPy and a CUDA GPU ({type(e).__name__}: {e})")
        return 0
    from cuweave.linalg.advanced import Matmul, MatmulComputeType

    m = n = k = 2048
    a = cp.random.rand(m, k, dtype=cp.float32)
    b = cp.random.rand(k, n, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    options = {"compute_type": MatmulComputeType.COMPUTE_32F_FAST_TF32}
    with stream, Matmul(a, b, options=options) as mm:
        algos = mm.plan()
        print(f"{len(algos)} algorithms from the heuristics:",
              [x.algorithm_id for x in algos])
        mm.autotune(iterations=5)
        print("after autotune, fastest first:", [x.algorithm_id for x in mm.algorithms])
        d = mm.execute()
        stream.synchronize()
    ref = cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64)
    err = np.linalg.norm(cp.asnumpy(d) - ref) / np.linalg.norm(ref)
    print(f"result {type(d).__module__}.{type(d).__name__} {d.shape}, TF32 error {err:.1e}")
    assert isinstance(d, cp.ndarray) and err < 1e-2
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
