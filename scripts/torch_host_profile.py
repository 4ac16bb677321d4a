"""Host time of ``cuweave.torch``'s eager layers per step, against torch's own layers.

Cases (bf16, ``tokens x hidden -> ffn -> hidden``, GELU(tanh), defaults 64, 1024, 4096):

- ``FusedMLP fwd+bwd`` / ``torch fwd+bwd``: ``torch.autograd.grad(module(x), [x, *params], dy)``
  (``benchmarks/cases_torch.py``'s step);
- ``FusedMLP fwd (no_grad)``, ``_ops.mlp_call fwd (no_grad)``, ``torch fwd (no_grad)``;
- ``_engine.run (1 GEMM)``: the forward's first product (GELU_AUX_BIAS) through the layers'
  engine, and ``Matmul.execute() (planned)``, the same product planned once (the floor).

With a usable CUDA device everything is real, and every span of calls is queued behind a long
``torch.cuda._sleep`` (the GPU never waited on; a span that outlived the sleep is dropped).
Without one, cuBLASLt and the CUDA runtime are stubbed as ``scripts/percall_profile.py`` stubs
them (but matmul descriptors: host objects, made and set by the real library where it
loads), and torch *meta* tensors pose as CUDA tensors of device 0: torch's dispatch, autograd
and allocator-side costs are real, no arithmetic runs (so torch's side costs no kernel launch
either: compare the two, not absolute numbers, with the GPU machine's). Prints the median µs
per call of interleaved blocks and, with ``--profile``, a cProfile of each cuweave case::

    PYTHONPATH=src:. python3 scripts/torch_host_profile.py [--profile] [--fake]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import os
import pstats
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(ROOT, "src"), ROOT, os.path.join(ROOT, "scripts")):
    if path not in sys.path:
        sys.path.insert(0, path)


def stub_gpu(device: str):
    """cuBLASLt and the runtime stubbed, meta tensors posing as CUDA ones (see the module
    documentation); returns the ``MonkeyPatch`` to undo."""
    import pytest
    from percall_profile import install

    from cuweave._bindings import cublaslt as lt
    from cuweave._internal import packages
    from cuweave.linalg.advanced import _cuda

    mp = pytest.MonkeyPatch()
    noop = ctypes.CDLL(None)["labs"]  # ignores the extra arguments (caller-cleaned C ABI)
    noop.restype = ctypes.c_int
    # matmul descriptors are host objects: where cuBLASLt loads, runs set their pointer
    # attributes through the real library (their cost is part of a run's)
    try:
        lt.lib()
        real = {name: getattr(lt, name) for name in (
            "matmul_desc_create", "matmul_desc_set_attribute", "matmul_desc_destroy")}
    except Exception:
        real = {}
    mp.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    mp.setattr(torch.Tensor, "get_device", lambda self: 0)
    mp.setattr(torch._C, "_cuda_getCurrentRawStream", abs, raising=False)
    mp.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    install(mp, "cuweave", noop)
    for name, fn in real.items():
        mp.setattr(lt, name, fn)
    if real:
        mp.setattr(_cuda, "_raw_desc_set_function", lambda: lt.bare(
            "cublasLtMatmulDescSetAttribute"))
    mp.setattr(packages.ADAPTERS["torch"], "device_type", device)
    if device == "meta":
        autocast = torch.is_autocast_enabled  # meta has no autocast state: ask CUDA's
        mp.setattr(torch, "is_autocast_enabled", lambda kind: autocast(
            "cuda" if kind == "meta" else kind))
    return mp


def blocks(torch_, hidden: int, ffn: int, device: str, dtype):
    from cuweave.torch import FusedMLP

    torch_.manual_seed(0)
    fused = FusedMLP(hidden, ffn, activation="gelu", device=device, dtype=dtype)
    plain = torch_.nn.Sequential(torch_.nn.Linear(hidden, ffn, device=device, dtype=dtype),
                                 torch_.nn.GELU(approximate="tanh"),
                                 torch_.nn.Linear(ffn, hidden, device=device, dtype=dtype))
    if device != "meta":
        plain.load_state_dict({"0.weight": fused.fc1.weight, "0.bias": fused.fc1.bias,
                               "2.weight": fused.fc2.weight, "2.bias": fused.fc2.bias})
    return fused, plain


def cases(tokens: int, hidden: int, ffn: int, device: str) -> tuple[dict, list]:
    from cuweave.linalg.advanced import Matmul
    from cuweave.torch import _engine, _ops

    dtype = torch.bfloat16
    fused, plain = blocks(torch, hidden, ffn, device, dtype)
    x = torch.randn(tokens, hidden, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(tokens, hidden, device=device, dtype=dtype)
    xd, p = x.detach(), [t.detach() for t in fused.parameters()]
    w1, b1 = p[0], p[1].reshape(1, -1)
    mm = Matmul(xd, w1.t())
    mm.plan(epilog="gelu_aux_bias", epilog_inputs={"bias": b1})

    def step(module):
        inputs = [x, *module.parameters()]
        return lambda: torch.autograd.grad(module(x), inputs, dy)

    def no_grad(fn):
        def call():
            with torch.no_grad():
                return fn()
        return call

    impls = {"FusedMLP fwd+bwd": step(fused), "torch fwd+bwd": step(plain),
             "FusedMLP fwd (no_grad)": no_grad(lambda: fused(x)),
             "_ops.mlp_call fwd (no_grad)": no_grad(lambda: _ops.mlp_call(xd, *p, "gelu")),
             "torch fwd (no_grad)": no_grad(lambda: plain(x)),
             "_engine.run (1 GEMM)": lambda: _engine.run(xd, w1.t(), "gelu_aux_bias",
                                                         {"bias": b1}),
             "Matmul.execute() (planned)": mm.execute}
    for fn in impls.values():  # plans made, lazy imports done
        for _ in range(20):
            fn()
    return impls, [mm]


def interleaved(impls: dict, calls: int, rounds: int, cuda: bool) -> dict:
    """µs/call per block, round-robin with the order rotated each round; on CUDA each block
    is queued behind a GPU sleep and kept only if the sleep outlived it."""
    names = list(impls)
    spans: dict = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            fn = impls[n]
            if cuda:
                done = torch.cuda.Event()
                torch.cuda._sleep(int(2e8))
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            if cuda:
                done.record()
                busy = not done.query()
                torch.cuda.synchronize()
                if not busy:
                    continue
            spans[n].append((t1 - t0) / calls * 1e6)
    return spans


def profile(fn, calls: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.runcall(lambda: [fn() for _ in range(calls)])
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
    return "\n".join(lines[start - 1:])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, help="default 64 (CUDA), 8 (stubbed)")
    ap.add_argument("--hidden", type=int, help="default 1024 (CUDA), 16 (stubbed)")
    ap.add_argument("--ffn", type=int, help="default 4096 (CUDA), 32 (stubbed)")
    ap.add_argument("--calls", type=int, default=20, help="calls per timed block")
    ap.add_argument("--rounds", type=int, default=40, help="blocks per case")
    ap.add_argument("--fake", action="store_true", help="stub the GPU even if one is usable")
    ap.add_argument("--fake-device", default="cpu", choices=("cpu", "meta"),
                    help="stubbed GPU: the tensors posing as CUDA ones (cpu: tiny shapes, "
                    "torch's side computes little; meta: the real shapes, but torch's meta "
                    "kernels are partly Python, so torch's side is not comparable)")
    ap.add_argument("--profile", action="store_true", help="cProfile each cuweave case")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.fake
    device = "cuda" if cuda else args.fake_device
    shape = (64, 1024, 4096) if cuda or device == "meta" else (8, 16, 32)
    args.tokens, args.hidden, args.ffn = (given or default for given, default in zip(
        (args.tokens, args.hidden, args.ffn), shape))
    mp = None if cuda else stub_gpu(device)
    torch.set_num_threads(1)
    try:
        impls, objs = cases(args.tokens, args.hidden, args.ffn, device)
        spans = interleaved(impls, args.calls, args.rounds, cuda)
        print(f"host µs per call, {'CUDA' if cuda else f'stubbed GPU ({device} tensors)'}, bf16 "
              f"T={args.tokens} h={args.hidden} ffn={args.ffn}")
        print(f"{'case':32s} {'median':>8s} {'min':>8s} {'blocks':>7s}")
        for name, t in spans.items():
            if t:
                print(f"{name:32s} {statistics.median(t):8.1f} {min(t):8.1f} {len(t):7d}")
        if args.profile:
            for name, fn in impls.items():
                if not name.startswith("torch"):
                    print(f"\n---- cProfile: {name} ({args.calls * 10} calls), by own time")
                    print(profile(fn, args.calls * 10, args.top))
        for obj in objs:
            obj.free()
    finally:
        from cuweave.torch import clear_plans

        clear_plans()
        if mp is not None:
            mp.undo()


if __name__ == "__main__":
    main()
