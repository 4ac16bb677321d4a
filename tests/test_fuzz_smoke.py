"""Smoke test of the CPU fuzzer (scripts/fuzz_cpu.py, issue #33).

Two things are checked: the fuzzer's oracles really fail on planted defects (a wrong result,
a write into an input, a write past a target's last element, an untyped error, a crash of the
child process), so a clean run means something; and a fixed-seed run of a few dozen cases
finds nothing beyond the known defects of docs/fuzz-findings.md, listed below by id. When a
fix lands, remove its entry here: the run then proves the defect stays fixed.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

if importlib.util.find_spec("torch") is None:  # found, not imported: the child imports it
    pytest.skip("the fuzzer passes torch CPU tensors among its operands",
                allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fuzz_cpu", ROOT / "scripts" / "fuzz_cpu.py")
fz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fz)

SEED = 7
N_CASES = 60


# ---------------------------------------------------------------- the known defects
def _dlpack(rec):
    return rec["pkg"] in ("dlpack", "dlpack_bytes", "mmap")


def _target(case):
    name = case.get("inplace")
    return case["ops"].get(name) if name else None


def _readonly_target(case):
    t = _target(case)
    return t is not None and (t["pkg"] in ("dlpack_bytes", "mmap") or (t["ro"] and _dlpack(t)))


def _dlpack_negative_strides(case):
    return any(_dlpack(r) and any(s < 0 for s in r["strides"]) for r in case["ops"].values())


def _c_has_extra_dims(case):
    c = case["ops"].get("c")
    a, b = case["ops"].get("a"), case["ops"].get("b")
    if c is None or a is None or b is None:
        return False
    nd = max(len(a["shape"]), len(b["shape"]))
    nd = nd if min(len(a["shape"]), len(b["shape"])) > 1 else nd - 1
    return len(c["shape"]) > nd


def _np_operand(case, pkgs):
    a = case["ops"].get("a")
    return case["target"] in ("npfft", "scipy") and a is not None and a["pkg"] in pkgs


#: id -> (what it is, predicate on (case, category, message)); docs/fuzz-findings.md#<id>
KNOWN = {
    "F06": ("one planned object shared by threads returns another thread's result (item 13)",
            lambda c, cat, m: cat == "thread-race"),
    "F09": ("an FFT result too large to allocate raises MemoryError, not a typed error "
            "(matmul and contractions fixed)",
            lambda c, cat, m: c["target"] == "huge" and c.get("which") in ("fft", "npfft")
            and cat == "untyped-error" and "MemoryError" in m),
    "F15": ("cuweave.fft.numpy refuses 0-d arrays / raises other types than NumPy for them",
            lambda c, cat, m: c["target"] in ("npfft", "scipy")
            and "at least one dimension" in m),
    "F18": ("cuweave.fft.numpy refuses repeated axes that NumPy transforms twice",
            lambda c, cat, m: cat == "refused-valid" and "axes must be unique" in m),
    "F19": ("cuweave.fft.numpy: precision and dtype of results differ from NumPy's "
            "(out= wider than the input; float16 inputs)",
            lambda c, cat, m: c["target"] == "npfft" and cat == "wrong-result" and (
                "numpy gives float16" in m or (c.get("out") and re.search(
                    r"max error \d(\.\d+)?e-0[5-9]", m) is not None))),
    "F20": ("cuweave.fft.numpy's AxisError is not numpy.exceptions.AxisError",
            lambda c, cat, m: cat == "error-mismatch" and m.startswith("AxisError")
            and "numpy raises AxisError" in m),
    "F21": ("cuweave.fft.numpy raises other error types than NumPy for bad axes/s/norm "
            "(InvalidOptionError where NumPy raises AxisError/IndexError/TypeError; another "
            "validation order when several arguments are bad)",
            lambda c, cat, m: cat == "error-mismatch" and c["target"] in ("npfft", "scipy")
            and re.match(r"(InvalidOptionError|InvalidOperandError|AxisError|"
                         r"OperandTypeError): (norm|axes|axis|s|n|x|out) ", m) is not None
            and re.search(r"(numpy|scipy) raises (AxisError|IndexError|TypeError|"
                          r"UFuncTypeError)", m) is not None),
}


def known(case, category, message):
    """The ids of the known defects this finding belongs to."""
    return [k for k, (_, pred) in KNOWN.items() if pred(case, category, message)]


# ---------------------------------------------------------------- the oracles can fail
@pytest.mark.parametrize("kind", ["wrong-result", "input-modified", "guard-write",
                                  "untyped-error"])
def test_planted_defect_is_caught(kind):
    case = fz.planted_case(kind)
    clean = dict(case)
    clean.pop("plant")
    assert fz.run_case(clean)[0] == []  # the same call without the defect passes
    findings, _ = fz.run_case(case)
    assert kind in [f[0] for f in findings], findings
    assert not known(case, kind, findings[0][1])  # no known defect hides a planted one


def test_fixed_seed_run_finds_only_known_defects_and_attributes_a_crash():
    cases = [fz.gen_case(SEED, i) for i in range(N_CASES)]
    crash = fz.planted_case("crash")
    results = fz.run_cases(cases + [crash], confirm=False)  # the crash runs last
    assert len(results) == N_CASES + 1
    *normal, (last_case, last) = results
    assert last_case is crash and [f[0] for f in last["findings"]] == ["crash"]
    unknown = []
    for case, ans in normal:
        assert ans["outcome"] != "fuzzer-error", ans
        for cat, msg in ans["findings"]:
            if not known(case, cat, msg):
                unknown.append(f"case {case['id']}: {cat}: {msg}\n{fz.reproducer(case)}")
    assert not unknown, "new defects (add them to docs/fuzz-findings.md):\n\n" + \
        "\n\n".join(unknown)
    # the run exercised every kind of target it names
    assert {c["target"] for c in cases} >= {"matmul", "fft", "npfft", "binary"}
