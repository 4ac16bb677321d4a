"""Timing and reporting for cuweave benchmarks (not tests: no timing is ever asserted).

GPU time: CUDA events around ``iters`` queued calls (after ``warmup``), via cuweave's own event
wrapper on the current stream of the package under test. Host overhead: µs per call of
back-to-back calls, synchronized once at the end. Results: JSON + Markdown + PNG.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time

__all__ = ["gpu_time_ms", "gpu_times_interleaved", "host_us_per_call", "host_us_interleaved",
           "cpu_time_ms", "Results", "device_sync", "peer", "l2_flush", "probe_main"]


def _working(impls: dict, warmup: int) -> dict:
    """The implementations whose warm-up calls succeed (a failing peer is reported and
    dropped, so it cannot hide the others)."""
    ok = {}
    for name, fn in impls.items():
        try:
            for _ in range(warmup):
                fn()
        except Exception as e:
            print(f"   {name} failed: {type(e).__name__}: {e}")
            continue
        ok[name] = fn
    return ok


def peer(name: str):
    """Import a peer package (torch, cupy, nvmath) if installed, else ``None``."""
    try:
        return __import__(name)
    except Exception:
        return None


def probe_main(doc: str, name: str, body, argv=None) -> int:
    """A ``probe_*.py`` script's main: ``--out DIR`` (default ``benchmarks/results``; ``doc``'s
    first line describes it), then ``body(results, torch)`` and ``DIR/<name>.{json,md,png}``;
    1 (said why) when torch has no CUDA."""
    import argparse

    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    out = p.parse_args(argv).out
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("torch with CUDA is needed")
        return 1
    res = Results()
    body(res, torch)
    for path in res.write(out, name):
        print(f"wrote {path}")
    return 0


def device_sync() -> None:
    from cuweave._internal import cuda

    cuda.driver().cuCtxSynchronize()


def _stream_ptr(stream) -> int:
    if stream is None:
        return 0
    from cuweave._internal.packages import resolve_stream

    return resolve_stream(stream).ptr


def gpu_time_ms(fn, *, iters: int = 20, warmup: int = 3, stream=None, repeats: int = 3) -> float:
    """Median over ``repeats`` of (event-timed span of ``iters`` queued calls) / ``iters``."""
    for _ in range(warmup):  # here, so that a failing ``fn`` raises
        fn()
    return gpu_times_interleaved({"fn": fn}, iters=iters, warmup=0, rounds=repeats,
                                 stream=stream)["fn"]


def _round_orders(impls: dict, rounds: int):
    """The ``(name, fn)`` order of each round of an interleaved timing: as given, reversed on
    odd rounds (no implementation always runs right after the same one)."""
    order = list(impls.items())
    for r in range(rounds):
        yield order if r % 2 == 0 else order[::-1]


def gpu_times_interleaved(impls: dict, *, iters: int = 20, warmup: int = 3, rounds: int = 5,
                          stream=None) -> dict:
    """:func:`gpu_time_ms` of several implementations, measured round-robin (one span of
    ``iters`` calls of each per round; median over ``rounds``): a GPU whose clocks drift under
    sustained load (power, heat) then affects every implementation alike, not the later ones.
    Odd rounds run in the reverse order, so that none always follows the same one (what the
    previous implementation left in L2, its clocks).
    """
    from cuweave._internal import cuda

    s = _stream_ptr(stream)
    impls = _working(impls, warmup)
    device_sync()
    spans: dict = {name: [] for name in impls}
    for order in _round_orders(impls, rounds):
        for name, fn in order:
            start, end = cuda.Event(), cuda.Event()
            start.record(s)
            for _ in range(iters):
                fn()
            end.record(s)
            end.synchronize()
            spans[name].append(start.elapsed_ms(end) / iters)
    return {name: statistics.median(t) for name, t in spans.items()}


def host_us_per_call(fn, *, calls: int = 2000, warmup: int = 50, sync=None,
                     repeats: int = 5) -> float:
    """Median over ``repeats`` of wall µs per call for ``calls`` back-to-back calls."""
    for _ in range(warmup):  # here, so that a failing ``fn`` raises
        fn()
    return host_us_interleaved({"fn": fn}, calls=calls, warmup=0, sync=sync,
                               rounds=repeats)["fn"]


def host_us_interleaved(impls: dict, *, calls: int = 2000, warmup: int = 50, sync=None,
                        rounds: int = 7) -> dict:
    """:func:`host_us_per_call` of several implementations, round-robin: each round times
    ``calls`` back-to-back calls of every implementation in turn; the median over ``rounds``.
    Host timings on a shared machine drift by tens of percent over seconds; interleaving makes
    the drift hit every implementation alike. Odd rounds run in the reverse order, so that no
    implementation always follows the same one (a heavy neighbour leaves the caches cold for
    whatever runs next: the first of a fixed order always ran after the last). ``calls`` may be
    a dict (name -> calls)."""
    per = calls if isinstance(calls, dict) else dict.fromkeys(impls, calls)
    impls = _working(impls, warmup)
    if sync:
        sync()
    spans: dict = {name: [] for name in impls}
    for order in _round_orders(impls, rounds):
        for name, fn in order:
            n = per[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if sync:
                sync()
            spans[name].append((time.perf_counter() - t0) / n * 1e6)
    return {name: statistics.median(t) for name, t in spans.items()}


def cpu_time_ms(fn, *, iters: int = 5, warmup: int = 1) -> float:
    """Median wall ms of ``fn()`` (CPU work)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


_FLUSH: dict = {}


def l2_flush(nbytes: int = 256 << 20) -> None:
    """Overwrite a buffer larger than L2 on the legacy stream (for cold-cache timings)."""
    from cuweave._internal import cuda

    drv = cuda.driver()
    buf = _FLUSH.get("buf")
    if buf is None:
        buf = _FLUSH["buf"] = cuda.check(drv.cuMemAlloc(nbytes))
    cuda.check(drv.cuMemsetD8Async(buf, 0, nbytes, 0))


class Results:
    """Collects rows ``{case, impl, metric, value, unit, ...}`` and writes JSON/MD/PNG."""

    def __init__(self):
        self.rows: list[dict] = []
        self.meta = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        }
        try:
            from cuweave._info import collect

            d = collect()
            self.meta["gpus"] = d.get("gpus")
            self.meta["packages"] = d.get("packages")
            self.meta["libraries"] = {k: v.get("version") for k, v in d["libraries"].items()}
        except Exception as e:  # pragma: no cover
            self.meta["info_error"] = str(e)

    def add(self, *, case: str, impl: str, metric: str, value: float, unit: str, **meta):
        row = {"case": case, "impl": impl, "metric": metric, "value": float(value),
               "unit": unit, **meta}
        self.rows.append(row)
        print(f"  {case:40s} {impl:28s} {metric:10s} {value:12.4g} {unit}", flush=True)
        return row

    def add_ratio(self, *, case: str, metric: str, num: str, den: str, higher_is_better: bool,
                  target: float | None = None):
        """Add ``cuweave-vs-<den>`` speedup for ``case`` (≥ 1 means cuweave is better)."""
        vals = {r["impl"]: r["value"] for r in self.rows
                if r["case"] == case and r["metric"] == metric}
        if num not in vals or den not in vals or not vals[num] or not vals[den]:
            return None
        ratio = vals[num] / vals[den] if higher_is_better else vals[den] / vals[num]
        return self.add(case=case, impl=f"{num} vs {den}", metric="speedup", value=ratio,
                        unit="x", target=target)

    def write(self, out_dir: str, name: str) -> list[str]:
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, name)
        with open(base + ".json", "w") as f:
            json.dump({"meta": self.meta, "rows": self.rows}, f, indent=1)
        with open(base + ".md", "w") as f:
            f.write(self.markdown(name))
        paths = [base + ".json", base + ".md"]
        png = self._plot(base + ".png")
        if png:
            paths.append(png)
        return paths

    def markdown(self, title: str) -> str:
        gpus = self.meta.get("gpus") or []
        where = ", ".join(g["name"] for g in gpus) or "CPU only"
        lines = [f"# {title}", "", f"{self.meta['time']} — {where} — Python "
                 f"{self.meta['python']}", "",
                 "| case | implementation | metric | value | unit | target |",
                 "|---|---|---|---:|---|---|"]
        for r in self.rows:
            tgt, most = r.get("target"), r.get("target_max")
            goal = "" if tgt is None else f"≥ {tgt:.3g}"
            if most is not None:  # a time or a cost: at most this
                goal = f"≤ {most:.3g}"
            lines.append(f"| {r['case']} | {r['impl']} | {r['metric']} | {r['value']:.4g} | "
                         f"{r['unit']} | {goal} |")
        return "\n".join(lines) + "\n"

    def _plot(self, path: str) -> str | None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except Exception:
            return None
        rows = [r for r in self.rows if r["metric"] == "speedup"]
        if not rows:
            return None
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
        labels = [f"{r['case']}\n{r['impl']}" for r in rows]
        vals = [r["value"] for r in rows]
        ax.barh(range(len(rows)), vals, color=["tab:green" if v >= (r.get("target") or 1.0)
                                               else "tab:red" for v, r in zip(vals, rows)])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.set_xlabel("speedup of cuweave (≥ 1: cuweave better)")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path
