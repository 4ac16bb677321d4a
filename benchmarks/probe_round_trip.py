"""Diagnostic: where the time of a NumPy matmul round trip goes (issue: >= 2x torch's manual path).

One table, every row timed round-robin with the others (median wall ms over the rounds), for
``n``² float32 operands (default 2048: two 16 MiB uploads, one 16 MiB download):

* the floors: one DMA of the bytes from/to an already pinned buffer, the GEMM alone on device
  operands, a host copy of 16 MiB into pinned memory (one thread), mapping the pages of a new
  16 MiB array (``populate``), registering and unregistering one;
* the staging phases: the pipelined upload of ``a`` and ``b``, the download into a new array,
  into a reused one (pages already mapped) and into a block of the pinned result pool (what a
  repeated round trip's result is: the DMA alone);
* the whole round trips: ``matmul()``, a planned ``execute()`` and torch's manual path.

    python benchmarks/probe_round_trip.py [n] [rounds]     (GPU, torch)
"""

import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from cuweave._internal import cuda, pinned  # noqa: E402
from cuweave._internal.staging import Stager, populate  # noqa: E402
from cuweave.linalg.advanced import Matmul, matmul  # noqa: E402


def _impls(n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    nbytes = a.nbytes
    da, db = torch.empty(n, n, device="cuda"), torch.empty(n, n, device="cuda")
    dc = torch.empty(n, n, device="cuda")
    raw = cuda.host_alloc(2 * nbytes)
    reused = np.empty_like(a)
    lockable = a.copy()  # never given to cuweave (whose registrations it must not meet)
    ta, tb = a.copy(), b.copy()
    pinned.take(nbytes)  # the size's first request gets no block
    block = pinned.take(nbytes).view(np.float32).reshape(n, n)
    stager = Stager()
    sync = torch.cuda.synchronize
    dev = Matmul(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
    dev.plan()
    planned = Matmul(a, b)
    planned.plan()

    def dma_h2d():
        cuda.memcpy_async(da.data_ptr(), raw, nbytes, 0)
        cuda.memcpy_async(db.data_ptr(), raw + nbytes, nbytes, 0)
        sync()

    def dma_d2h():
        cuda.memcpy_async(raw, dc.data_ptr(), nbytes, 0)
        sync()

    def upload():
        stager.upload_many([(a, da.data_ptr()), (b, db.data_ptr())], 0)
        sync()

    def gemm():
        dev.execute()
        sync()

    def register():
        if cuda.host_register(lockable.ctypes.data, nbytes):
            cuda.host_unregister(lockable.ctypes.data)
        else:  # the row then times a refusal, not a registration
            print("   cuMemHostRegister refused the probe's array", flush=True)

    def fresh_pages():
        out = np.empty_like(a)
        populate(out.ctypes.data, out.nbytes)

    impls = {
        "floor: DMA 2 x 16 MiB host -> device from pinned": dma_h2d,
        "floor: DMA 16 MiB device -> host to pinned": dma_d2h,
        "floor: GEMM alone (device operands, planned)": gemm,
        "floor: host copy 16 MiB into pinned, one thread": lambda: ctypes.memmove(
            raw, a.ctypes.data, nbytes),
        "floor: map the pages of a new 16 MiB array": fresh_pages,
        "floor: cuMemHostRegister + cuMemHostUnregister of a 16 MiB array": register,
        "staging: upload a and b (pipelined, copy threads)": upload,
        "staging: download into a new array": lambda: stager.download(dc.data_ptr(),
                                                                      np.empty_like(a), 0),
        "staging: download into a reused array": lambda: stager.download(dc.data_ptr(), reused,
                                                                         0),
        "staging: download into a pooled pinned block": lambda: stager.download(dc.data_ptr(),
                                                                              block, 0),
        "round trip: cuweave matmul() (a, b registered from their third upload)":
            lambda: matmul(a, b),
        "round trip: cuweave matmul(), operands new to it (copies included)":
            lambda: matmul(a.copy(), b.copy()),
        "round trip: torch manual, the same copies included": lambda: torch.matmul(
            torch.from_numpy(a.copy()).cuda(), torch.from_numpy(b.copy()).cuda()).cpu().numpy(),
        "round trip: cuweave planned execute()": planned.execute,
        # its own copies: cuweave page-locks a and b in place (the driver would DMA them too)
        "round trip: torch manual": lambda: torch.matmul(torch.from_numpy(ta).cuda(),
                                                         torch.from_numpy(tb).cuda()).cpu().numpy(),
    }
    keep = (da, db, dc, reused, lockable, ta, tb, block, stager, dev, planned)
    return impls, raw, keep


def main(n=2048, rounds=15):
    impls, raw, keep = _impls(n)
    times = {name: [] for name in impls}
    for fn in impls.values():  # warm-up: plans, pools, copy threads
        fn()
        fn()
    for _ in range(rounds):
        for name, fn in impls.items():
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) * 1e3)
    print(f"\n### NumPy {n}² float32 round trip, phase by phase "
          f"({torch.cuda.get_device_name()}, median of {rounds} interleaved rounds)\n")
    print("| step | ms |\n|---|---:|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.3f} |", flush=True)
    cuda.host_free(raw)
    del keep


if __name__ == "__main__":
    main(*(int(v) for v in sys.argv[1:3]))
