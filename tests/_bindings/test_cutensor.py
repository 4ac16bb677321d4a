"""The cuTENSOR wrappers reach the library (where it is installed; no GPU needed): every one,
given a null handle, comes back with cuTENSOR's INVALID_VALUE as a CutensorError (so the ctypes
marshalling of its arguments holds), and the untyped contraction entry points take the
pre-built argument tuples the engine passes."""

from __future__ import annotations

import ctypes

import pytest

from cuweave._bindings import cutensor as ct


@pytest.fixture(scope="module")
def lib():
    if not ct.is_loadable():
        pytest.skip("libcutensor is not installed (the tensor extra)")
    return ct.library()


def _calls():
    c32 = lambda: ct.compute_descriptor("32F")  # noqa: E731
    return [
        ("create_tensor_descriptor", lambda: ct.create_tensor_descriptor(0, [2, 3], [3, 1], 0,
                                                                         256)),
        ("create_contraction", lambda: ct.create_contraction(
            0, 0, [0, 1], 1, 0, [1, 2], 1, 0, [0, 2], 1, 0, [0, 2], c32())),
        ("create_contraction_trinary", lambda: ct.create_contraction_trinary(
            0, 0, [0], 1, 0, [0], 1, 0, [0], 1, 0, [], 1, 0, [], c32())),
        ("create_plan_preference", lambda: ct.create_plan_preference(0, ct.Algo.DEFAULT,
                                                                     ct.JitMode.NONE)),
        ("plan_preference_set_attribute", lambda: ct.plan_preference_set_attribute(
            0, 0, ct.PlanPreferenceAttribute.JIT, 1)),
        ("create_plan", lambda: ct.create_plan(0, 0, 0, 1 << 20)),
        ("plan_get_attribute", lambda: ct.plan_get_attribute(
            0, 0, ct.PlanAttribute.REQUIRED_WORKSPACE)),
        ("estimate_workspace_size", lambda: ct.estimate_workspace_size(
            0, 0, 0, ct.WorksizePreference.WORKSPACE_DEFAULT)),
    ]


@pytest.mark.parametrize("name, call", _calls(), ids=[n for n, _ in _calls()])
def test_wrappers_turn_statuses_into_errors(lib, name, call):
    with pytest.raises(ct.CutensorError, match="INVALID_VALUE") as e:
        call()
    assert e.value.status == ct.Status.INVALID_VALUE


@pytest.mark.parametrize("name, n_args", [("cutensorContract", 11),
                                          ("cutensorContractTrinary", 12)])
def test_untyped_contraction_entry_points(lib, name, n_args):
    vp = ctypes.c_void_p
    args = [vp() for _ in range(n_args - 2)] + [ctypes.c_uint64(0), vp()]
    assert ct.bare(name)(*args) == ct.Status.INVALID_VALUE


def test_version_and_compute_descriptors(lib):
    assert ct.get_version() >= 20000
    ptrs = {ct.compute_descriptor(n) for n in ct.COMPUTE_DESCRIPTORS}
    assert len(ptrs) == len(ct.COMPUTE_DESCRIPTORS) and 0 not in ptrs
