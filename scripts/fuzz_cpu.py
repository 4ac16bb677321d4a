#!/usr/bin/env python
"""CPU fuzzer of cuweave's public entry points (issue #33).

Thousands of random calls (dtypes, layouts, views, in place, bad options) of
``cuweave.linalg.advanced.matmul``/``Matmul``, ``cuweave.fft.fft/ifft/rfft/irfft``/``FFT``,
``cuweave.fft.numpy.*`` (against ``numpy.fft``), the scipy.fft backend (against ``scipy.fft``)
and ``cuweave.tensor.binary_contraction``/``ternary_contraction``, all on the CPU. Each call is
judged by five oracles:

1. no crash: cases run in a child process with a watchdog; a segfault or a hang is pinned on
   the case that was running;
2. no wrong result: results are compared with a float64 NumPy reference (``numpy.matmul``,
   ``numpy.fft``, ``numpy.einsum``), shape and dtype included;
3. no write outside a target: every operand lives inside a larger guard buffer filled with a
   sentinel; afterwards the guard bytes, the gaps between strided elements and every input are
   checked (only an in-place target's own elements may change);
4. no untyped error: an exception must be a ``cuweave.CuweaveError`` (for the NumPy-style API
   and the scipy backend: an instance of the type NumPy/SciPy raise on the same call);
5. where NumPy/SciPy accept and compute, the NumPy-style API and the scipy backend must too.

A threads mode shares one planned Matmul/FFT between threads (``reset_operands`` + ``execute``
in each) and checks every result.

Cases are plain JSON (``gen_case``), deterministic in (seed, index); each failing case is
written with a reproducer (plain NumPy/torch code) to ``DIR/fuzz_cpu.json`` and a summary by
category to ``DIR/fuzz_cpu.md``. Identical failures (same signature) are kept once, the
smallest case as the reproducer.

Files: ``fuzz_cpu_cases.py`` (operand recipes, guard buffers, case generators),
``fuzz_cpu_oracles.py`` (oracles and runners of the nvmath-style entry points, threads,
lifecycles, too-large results), ``fuzz_cpu_numpy.py`` (the NumPy-style API and the scipy
backend against NumPy/SciPy); this file: the runner table, planted defects, reproducers, the
child process, the report and the command line.

Usage::

    PYTHONPATH=src python scripts/fuzz_cpu.py --cases 5000 --seed 1 --out benchmarks/results
    PYTHONPATH=src python scripts/fuzz_cpu.py --seed 1 --replay 1234     # one case, verbose
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the fuzz_cpu_* modules

from fuzz_cpu_cases import (  # noqa: E402
    PRODUCER_CODE,
    code_of,
    gen_case,
    make_recipe,
    n_elements,
    plain,
    recipe_code,
)
from fuzz_cpu_numpy import _ONE_D, SERVE_ON_CPU_CODE, run_npfft  # noqa: E402
from fuzz_cpu_oracles import (  # noqa: E402
    _lib,
    run_contraction,
    run_FFT,
    run_fft,
    run_huge,
    run_lifecycle,
    run_Matmul,
    run_matmul,
    run_threads,
)

CASE_TIMEOUT_S = 30.0

#: failure categories, in report order
CATEGORIES = ("crash", "hang", "wrong-result", "guard-write", "input-modified",
              "untyped-error", "error-mismatch", "refused-valid", "accepts-invalid",
              "thread-race")


RUNNERS = {"matmul": run_matmul, "Matmul": run_Matmul, "fft": run_fft, "FFT": run_FFT,
           "npfft": run_npfft, "scipy": run_npfft, "binary": run_contraction,
           "ternary": run_contraction, "threads": run_threads, "lifecycle": run_lifecycle,
           "huge": run_huge}


# ================================================================ planted defects (self-test)
def _plant(kind, lib):
    """Monkeypatch a deliberate defect for one case (the smoke test proves the oracles can
    fail). Returns an undo function."""
    la, F = lib.linalg.advanced, lib.fft
    orig_mm, orig_fft = la.matmul, F.fft
    if kind == "crash":
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "wrong-result":
        def mm(*a, **k):
            return orig_mm(*a, **k) + 1
        la.matmul = mm
    elif kind == "input-modified":
        def mm(a, *rest, **k):
            r = orig_mm(a, *rest, **k)
            a.flat[0] += 1
            return r
        la.matmul = mm
    elif kind == "guard-write":
        def fft(x, *a, **k):
            r = orig_fft(x, *a, **k)
            import ctypes
            last = x.__array_interface__["data"][0] + sum(
                (n - 1) * s for n, s in zip(x.shape, x.strides) if s > 0)
            ctypes.memset(last + x.itemsize, 0, 1)
            return r
        F.fft = fft
    elif kind == "untyped-error":
        def fft(x, *a, **k):
            raise RuntimeError("planted")
        F.fft = fft

    def undo():
        la.matmul, F.fft = orig_mm, orig_fft
    return undo


def planted_case(kind, seed=0):
    """A simple valid case (C-ordered NumPy operands) carrying a planted defect."""
    rng = np.random.default_rng(seed)
    if kind in ("wrong-result", "input-modified", "crash"):
        case = {"target": "matmul", "kw": {"execution": "cpu"}, "expect": "ok",
                "ops": {"a": make_recipe(rng, [3, 4], "float64", layouts=["c"], flags=False),
                        "b": make_recipe(rng, [4, 2], "float64", layouts=["c"], flags=False)}}
    else:
        case = {"target": "fft", "kind": "fft", "axes": [0], "expect": "ok",
                "kw": {"execution": "cpu"},
                "ops": {"x": make_recipe(rng, [8], "complex128", layouts=["c"], flags=False)}}
    case.update(id=-1, seed=seed, plant=kind)
    return case


# ================================================================ one case, in this process
def run_case(case):
    """Run one case here; returns (findings, outcome)."""
    import warnings
    lib = _lib()
    findings = []
    undo = _plant(case["plant"], lib) if case.get("plant") else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = RUNNERS[case["target"]](case, findings, lib)
    except Exception as e:  # noqa: BLE001 (a defect of the fuzzer itself, reported)
        import traceback
        findings.append(("fuzzer-error", "".join(traceback.format_exception(e))[-1500:]))
        outcome = "fuzzer-error"
    finally:
        if undo is not None:
            undo()
    return findings, outcome


# ================================================================ reproducers
def _kw_code(kw, extra=()):
    parts = [f"{k}={code_of(v)}" for k, v in kw.items()]
    return ", ".join(list(extra) + parts)


def _operand_lines(case, suffix="", warm=False, shift=0):
    lines = []
    for name, rec in case["ops"].items():
        r = plain(rec) if warm else rec
        if shift:
            r = dict(r, seed=r["seed"] + shift)
        lines.append(recipe_code(name + suffix, r))
    return lines


def _call_code(case, s=""):
    """The one call of a function-form case, operands named with suffix ``s``."""
    kw = dict(case["kw"])
    ops = case["ops"]
    t = case["target"]
    if t == "matmul":
        extra = [f"a{s}", f"b{s}"] + ([f"c=c{s}"] if "c" in ops else [])
        if "bias" in ops:
            extra.append(f"epilog_inputs={{'bias': bias{s}}}")
        return f"cuweave.linalg.advanced.matmul({_kw_code(kw, extra)})"
    if t == "fft":
        return f"cuweave.fft.{case['kind']}({_kw_code(kw, [f'x{s}'])})"
    if t in ("binary", "ternary"):
        names = ["a", "b", "c"] if t == "ternary" else ["a", "b"]
        extra = [repr(case["expr"])] + [n + s for n in names]
        for k in ("c", "d", "out"):
            if k in ops and k not in names:
                extra.append(f"{k}={k}{s}")
        fn = "ternary_contraction" if t == "ternary" else "binary_contraction"
        return f"cuweave.tensor.{fn}({_kw_code(kw, extra)})"
    raise ValueError(t)


def reproducer(case, finding=None):
    """Plain Python (NumPy/torch/cuweave) that replays ``case``."""
    ops = case["ops"]
    lines = ["import numpy as np", "import cuweave", "import cuweave.fft",
             "import cuweave.linalg.advanced", "import cuweave.tensor"]
    if any(r["pkg"] == "torch" for r in ops.values()):
        lines.append("import torch")
    if case["target"] == "scipy":
        lines.append("import scipy.fft")
    if any(r["pkg"] == "mmap" for r in ops.values()):
        lines.append("import mmap, tempfile")
    if any(r["pkg"] in ("dlpack", "dlpack_bytes", "mmap") for r in ops.values()):
        lines.append(PRODUCER_CODE)
    t = case["target"]
    if t in ("matmul", "fft", "binary", "ternary"):
        if case.get("warm"):
            lines.append("# the same layouts once before (writable): the plan-cache hit path")
            lines += _operand_lines(case, "0", warm=True)
            lines.append(_call_code(case, "0"))
        lines += _operand_lines(case)
        lines.append(f"r = {_call_code(case)}")
    elif t in ("Matmul", "FFT"):
        lines += _stateful_code(case)
    elif t in ("npfft", "scipy"):
        lines += _np_code(case)
    else:
        lines += _special_code(case)
    if finding is not None:
        lines.append(f"# {finding[0]}: {finding[1][:400]}")
    return "\n".join(lines)


def _stateful_code(case):
    kw = dict(case["kw"])
    ops = case["ops"]
    lines = _operand_lines(case)
    if case["target"] == "Matmul":
        plan_kw = {k: kw.pop(k) for k in ("epilog", "epilog_inputs") if k in kw}
        extra = ["a", "b"] + (["c=c"] if "c" in ops else [])
        lines.append(f"mm = cuweave.linalg.advanced.Matmul({_kw_code(kw, extra)})")
        pe = ["epilog_inputs={'bias': bias}"] if "bias" in ops else []
        lines.append(f"mm.plan({_kw_code(plan_kw, pe)})")
        lines.append("r0 = mm.execute()")
        for i in range(1, case.get("resets", 1) + 1):
            lines += _operand_lines(case, str(i), shift=1000 * i)
            new = [f"{k}={k}{i}" for k in ("a", "b", "c") if k in ops]
            if "bias" in ops:
                new.append(f"epilog_inputs={{'bias': bias{i}}}")
            lines.append(f"mm.reset_operands({', '.join(new)})")
            lines.append(f"r{i} = mm.execute()")
        return lines
    plan_kw = {k: kw.pop(k) for k in ("norm", "direction", "prolog") if k in kw}
    if case["kind"] in ("ifft", "irfft") and "direction" not in plan_kw:
        plan_kw["direction"] = "inverse"
    ex = {"direction": plan_kw["direction"]} if "direction" in plan_kw else {}
    if case["kind"] == "irfft":
        kw["options"] = dict({"fft_type": "C2R"}, **(kw.get("options") or {}))
    lines.append(f"f = cuweave.fft.FFT({_kw_code(kw, ['x'])})")
    lines.append(f"f.plan({_kw_code(plan_kw)})")
    lines.append(f"r0 = f.execute({_kw_code(ex)})")
    for i in range(1, case.get("resets", 1) + 1):
        lines += _operand_lines(case, str(i), shift=1000 * i)
        lines.append(f"f.reset_operand(x{i})")
        lines.append(f"r{i} = f.execute({_kw_code(ex)})")
    return lines


def _np_args_code(case, kw, out):
    """The call's arguments as code (by name or by position, as the case says)."""
    if out:
        kw = dict(kw, out=None)
    if case.get("keywords") or case["target"] == "scipy":
        return ", ".join(["a"] + [f"{k}={out if k == 'out' else code_of(v)}"
                                  for k, v in kw.items()])
    names = (["n", "axis", "norm", "out"] if case["fn"] in _ONE_D else
             ["s", "axes", "norm", "out"])
    given = [i for i, nm in enumerate(names) if nm in kw]
    return ", ".join(["a"] + ([(out if nm == "out" else code_of(kw.get(nm)))
                               for nm in names[:max(given) + 1]] if given else []))


def _np_code(case):
    """NumPy/SciPy and cuweave on the same arguments, each error printed."""
    lines = _operand_lines(case)
    kw = dict(case["kw"])
    mod = "scipy.fft" if case["target"] == "scipy" else "np.fft"
    fn = case["fn"]
    if case.get("out"):  # out= of NumPy's result shape (strides of the layout approximated)
        spec = case["out"]
        lines.append("try:")
        lines.append(f"    shape = list(np.shape({mod}.{fn}({_np_args_code(case, kw, '')})))")
        lines.append("except Exception:")
        lines.append("    shape = list(np.shape(a))")
        if spec["shape_delta"]:
            lines.append("shape[-1] += 1  # one more than NumPy's result")
        make = f"np.zeros(shape, {spec['dtype']!r})"
        if spec["layout"] == "f":
            make = f"np.asfortranarray({make})"
        elif spec["layout"] == "slice":
            make = (f"np.zeros([2 * n for n in shape], {spec['dtype']!r})"
                    "[tuple(slice(None, None, 2) for _ in shape)]")
        lines.append(f"out_np, out = {make}, {make}")
    call_ref = _np_args_code(case, kw, "out_np" if case.get("out") else "")
    call = _np_args_code(case, kw, "out" if case.get("out") else "")
    lines += ["try:", f"    ref = {mod}.{fn}({call_ref})",
              f"except Exception as e:\n    print('{mod} raises', type(e).__name__, e)"]
    if case["target"] == "scipy":
        if case.get("served_on_cpu"):
            lines.append(SERVE_ON_CPU_CODE)
        lines += ["try:", "    with scipy.fft.set_backend(cuweave.fft.scipy_backend):",
                  f"        r = scipy.fft.{fn}({call})"]
    else:
        lines += ["try:", f"    r = cuweave.fft.numpy.{fn}({call})"]
    lines.append("except Exception as e:\n    print('cuweave raises', type(e).__name__, e)")
    return lines


def _special_code(case):
    t = case["target"]
    if t == "threads":
        w = case["which"]
        return [f"# {case['threads']} threads share one planned object ({w}); each does "
                f"{case['iters']} x (reset + execute) with its own operands, seed0="
                f"{case['seed0']}: see run_threads in scripts/fuzz_cpu_oracles.py",
                f"# python scripts/fuzz_cpu.py --seed {case['seed']} --replay {case['id']}"]
    if t == "lifecycle":
        if case["which"] == "Matmul":
            lines = ["a, b = np.ones((4, 3)), np.ones((3, 2))",
                     "obj = cuweave.linalg.advanced.Matmul(a, b, execution='cpu')"]
        else:
            lines = ["x = np.ones(8, np.complex128)",
                     "obj = cuweave.fft.FFT(x, execution='cpu')"]
        lines.append("obj.plan()")
        code = {"execute": "obj.execute()", "execute_after": "obj.execute()",
                "pickle": "import pickle; pickle.loads(pickle.dumps(obj)).execute()",
                "deepcopy": "import copy; copy.deepcopy(obj).execute()",
                "copy": "import copy; copy.copy(obj).execute()", "free": "obj.free()",
                "set_alpha": "obj.alpha = 2.0", "plan": "obj.plan()",
                "reset": ("obj.reset_operands(a, b)" if case["which"] == "Matmul"
                          else "obj.reset_operand(x)"),
                "release": ("obj.release_operands()" if case["which"] == "Matmul"
                            else "obj.release_operand()"),
                "algorithm_x": "cuweave.linalg.advanced.Algorithm('x')"}
        return lines + [code[s] for s in case["steps"]]
    big = "np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), {}, {})"
    if case["which"] == "matmul":
        return [f"a = {big.format((1 << 24, 1), (0, 0))}",
                f"b = {big.format((1, 1 << 24), (0, 0))}",
                "cuweave.linalg.advanced.matmul(a, b, execution='cpu')  # 2**48 results"]
    if case["which"] in ("fft", "npfft"):
        mod = "cuweave.fft.numpy.fft(x)" if case["which"] == "npfft" else \
            "cuweave.fft.fft(x, axes=(1,), execution='cpu')"
        return [f"x = {big.format((1 << 20, 1 << 20), (0, 0)).replace('float32', 'complex64')}",
                mod + "  # an 8 TiB result"]
    return [f"a = {big.format((1 << 24,), (0,))}",
            "cuweave.tensor.binary_contraction('i,j->ij', a, a, execution='cpu')"]


# ================================================================ signatures, sizes
def case_size(case):
    return sum(n_elements(r) for r in case["ops"].values()) + 3 * len(case["kw"]) + (
        10 * len(case.get("steps", ())))


def features(case):
    """The case's traits that matter to a defect (part of a finding's signature)."""
    f = []
    tgt = case.get("inplace")
    if tgt and tgt in case["ops"]:
        rec = case["ops"][tgt]
        f.append("target=" + "+".join(
            [rec["pkg"]] + (["ro"] if rec["ro"] else []) + (["conj"] if rec["conj"] else [])
            + (["overlapping"] if rec["overlaps"] else [])))
    if case.get("warm"):
        f.append("warm")
    if case.get("bad"):
        f.append(f"bad={case['bad'][0]}")
    if case.get("plant"):
        f.append(f"plant={case['plant']}")
    return f


def signature(case, finding):
    cat, msg = finding
    what = case.get("kind") or case.get("fn") or case.get("which") or ""
    head = msg.split(":")[0] if cat in ("untyped-error", "refused-valid", "error-mismatch") \
        else ""
    if cat in ("untyped-error", "refused-valid", "error-mismatch"):
        import re
        m = re.search(r"\b([A-Z][A-Za-z]*(Error|Exception|Warning))\b", msg)
        head = m.group(1) if m else head
    return "|".join([cat, case["target"] + (f".{what}" if what else ""), head] +
                    features(case))


# ================================================================ child process protocol
def worker_main():
    """Read one JSON case per line on stdin, answer one JSON line on the protocol fd."""
    import resource
    limit = int(os.environ.get("FUZZ_MEMORY_LIMIT", 6 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the library prints goes to stderr, not the protocol
    sys.stdout = sys.stderr
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    _lib()
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        case = json.loads(line)
        t0 = time.perf_counter()
        findings, outcome = run_case(case)
        proto.write(json.dumps({"findings": findings, "outcome": outcome,
                                "ms": 1e3 * (time.perf_counter() - t0)}) + "\n")


class Worker:
    """A child process running cases, restarted after a crash or a hang."""

    def __init__(self):
        import subprocess
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True,
                                     bufsize=1)
        self._read(120.0)

    def _read(self, timeout):
        import select
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else "eof"

    def run(self, case, timeout=CASE_TIMEOUT_S):
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ans = self._read(timeout)
        if isinstance(ans, dict):
            return ans
        if ans is None:
            self.proc.kill()
            self.proc.wait()
            return {"findings": [("hang", f"no answer in {timeout:.0f} s")], "outcome": "hang",
                    "ms": 1e3 * timeout}
        code = self.proc.wait()
        return {"findings": [("crash", f"the process died (exit status {code}"
                              + (f", signal {-code})" if code < 0 else ")"))],
                "outcome": "crash", "ms": 0.0}

    @property
    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.alive:
            self.proc.stdin.close()
            self.proc.wait(10)


def _may_corrupt(case, ans):
    """Did this case write where it must not (beyond what the guards see, perhaps)?"""
    if ans["outcome"] in ("crash", "hang"):
        return True  # a confirming run that did not crash may still have corrupted memory
    for cat, _ in ans["findings"]:
        if cat in ("guard-write", "input-modified"):
            return True
        if cat == "wrong-result" and case.get("inplace") and case["ops"].get(
                case["inplace"], {}).get("pkg") in ("dlpack", "dlpack_bytes", "mmap"):
            return True  # written through DLPack at wrong addresses
    return False


def run_cases(cases, progress=None, confirm=True):
    """Run ``cases`` in a child process; returns a list of (case, answer). The child is
    restarted after a crash, a hang or a write outside a guard (the heap may be corrupt); a
    crash is run again alone in a fresh child to confirm it is this case's (``confirm``).
    Restarts make a crash or an odd error here the case's own, not the aftermath of an
    earlier case's write into read-only memory or outside a target."""
    results = []
    worker = Worker()
    try:
        for i, case in enumerate(cases):
            if not worker.alive:
                worker = Worker()
            ans = worker.run(case)
            if ans["outcome"] == "crash" and confirm:
                worker = Worker()
                again = worker.run(case)
                if again["outcome"] != "crash":
                    prev = cases[i - 1]["id"] if i else None
                    ans["findings"] = [("crash", ans["findings"][0][1] + "; not reproduced "
                                        f"alone: memory corrupted earlier (case {prev} ran "
                                        "just before)")]
            if _may_corrupt(case, ans) and worker.alive:
                worker.close()  # the heap may be corrupt beyond the guards: a fresh child
                worker = Worker()
            results.append((case, ans))
            if progress and (i + 1) % progress == 0:
                print(f"  {i + 1}/{len(cases)} cases", file=sys.stderr, flush=True)
    finally:
        worker.close()
    return results


# ================================================================ report
def load_known():
    """The known-defect table of tests/test_fuzz_smoke.py (id -> (title, predicate)), or {}
    where it cannot be loaded: the report then groups by signature only."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests",
                        "test_fuzz_smoke.py")
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location("_fuzz_smoke_known", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.KNOWN
    except Exception:  # noqa: BLE001 (no pytest, no torch, no test file: no grouping)
        return {}


def summarize(results, seed, wall_s):
    known = load_known()
    per_known = Counter()
    failures = []
    per_cat = Counter()
    outcomes = Counter()
    per_target = Counter()
    groups = {}
    for case, ans in results:
        per_target[case["target"]] += 1
        outcomes[(case["target"], ans["outcome"].split(":")[0])] += 1
        seen = set()
        for cat, msg in ans["findings"]:
            per_cat[cat] += 1
            ids = [k for k, (_, pred) in known.items() if pred(case, cat, msg)]
            for k in ids:
                per_known[k] += 1
            failures.append({"case": case["id"], "category": cat, "message": msg[:240],
                             "known": ids})
            sig = signature(case, (cat, msg))
            if sig in seen:
                continue
            seen.add(sig)
            g = groups.setdefault(sig, {"signature": sig, "category": cat, "count": 0,
                                        "cases": []})
            g["count"] += 1
            g["cases"].append(case["id"])
            size = case_size(case)
            if "case" not in g or size < g["size"]:
                g.update(case=case, size=size, message=msg,
                         reproducer=reproducer(case, (cat, msg)))
    for g in groups.values():
        g["cases"] = g["cases"][:20]
    ms = [ans["ms"] for _, ans in results]
    return {"seed": seed, "cases": len(results), "wall_s": round(wall_s, 1),
            "s_per_1000_cases": round(1000 * wall_s / max(len(results), 1), 1),
            "mean_case_ms": round(float(np.mean(ms)), 2) if ms else 0.0,
            "cases_per_target": dict(per_target),
            "failing_cases": sum(1 for _, a in results if a["findings"]),
            "findings_per_category": {c: per_cat[c] for c in CATEGORIES + ("fuzzer-error",)
                                      if per_cat[c]},
            "outcomes": {f"{t}:{o}": n for (t, o), n in sorted(outcomes.items())},
            "findings_per_known_defect": {k: [known[k][0], per_known[k]] for k in sorted(
                known, key=lambda k: (len(k), k)) if per_known[k]},
            "unknown_findings": sum(1 for f in failures if not f["known"]),
            "failures": failures,
            "distinct": sorted(groups.values(), key=lambda g: (CATEGORIES.index(g["category"])
                                                              if g["category"] in CATEGORIES
                                                              else 99, -g["count"]))}


def write_report(summary, out_dir, command):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "fuzz_cpu.json"), "w") as f:
        json.dump(dict(summary, command=command), f, indent=1, default=str)
    lines = ["# CPU fuzz of cuweave (scripts/fuzz_cpu.py)", "",
             f"`{command}`", "",
             f"{summary['cases']} cases (seed {summary['seed']}) in {summary['wall_s']} s "
             f"({summary['s_per_1000_cases']} s per 1,000 cases, one child process, "
             f"mean {summary['mean_case_ms']} ms a case); {summary['failing_cases']} cases "
             "failed an oracle.", "",
             "Cases per target: " + ", ".join(f"{k} {v}" for k, v in
                                              sorted(summary["cases_per_target"].items())),
             "", "## Findings per category", "", "| category | findings | distinct |",
             "|---|---:|---:|"]
    dist = Counter(g["category"] for g in summary["distinct"])
    for cat, n in summary["findings_per_category"].items():
        lines.append(f"| {cat} | {n} | {dist[cat]} |")
    if summary["findings_per_known_defect"]:
        lines += ["", "## Findings per known defect (docs/fuzz-findings.md)", "",
                  "| id | defect | findings |", "|---|---|---:|"]
        for k, (title, n) in summary["findings_per_known_defect"].items():
            lines.append(f"| {k} | {title} | {n} |")
        lines += ["", f"Findings matching no known defect: {summary['unknown_findings']}."]
    lines += ["", "## Distinct failures (signature = category | target | error | traits)", "",
              "Each with the number of cases and the smallest case's message; the "
              "reproducers are in fuzz_cpu.json; docs/fuzz-findings.md groups them into "
              "defects.", ""]
    for g in summary["distinct"]:
        lines.append(f"- **{g['signature']}** ({g['count']} cases, e.g. case {g['case']['id']})"
                     f": {g['message'][:200]}")
    with open(os.path.join(out_dir, "fuzz_cpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--out", default=None, help="directory for fuzz_cpu.json/.md")
    p.add_argument("--replay", type=int, default=None, help="run one case here, verbosely")
    p.add_argument("--target", default=None, help="only cases of this target")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main()
    if args.replay is not None:
        case = gen_case(args.seed, args.replay)
        print(json.dumps(case, indent=1))
        print(reproducer(case))
        findings, outcome = run_case(case)
        print("outcome:", outcome)
        for f in findings:
            print(" ", f[0], "|", signature(case, f), "|", f[1])
        return 1 if findings else 0
    cases = [gen_case(args.seed, i) for i in range(args.start, args.start + args.cases)]
    if args.target:
        cases = [c for c in cases if c["target"] == args.target]
    t0 = time.perf_counter()
    results = run_cases(cases, progress=500)
    summary = summarize(results, args.seed, time.perf_counter() - t0)
    command = (f"PYTHONPATH=src python scripts/fuzz_cpu.py --cases {args.cases} "
               f"--seed {args.seed}" + (f" --start {args.start}" if args.start else "")
               + (f" --target {args.target}" if args.target else "")
               + (f" --out {args.out}" if args.out else ""))
    if args.out:
        write_report(summary, args.out, command)
    print(json.dumps({k: summary[k] for k in ("cases", "wall_s", "s_per_1000_cases",
                                              "failing_cases", "findings_per_category")},
                     indent=1))
    for g in summary["distinct"]:
        print(f"{g['count']:5d}  {g['signature']}  :: {g['message'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
