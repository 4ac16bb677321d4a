#!/usr/bin/env bash
# Everything a GPU is needed for, in one command, on the GPU machine (see ../shared/GPU.md):
# installs the carried wheels (.whl/), runs the GPU tests, the examples and the quick benchmarks.
#   bash scripts/gpu-check.sh                 # all parts (about 20 minutes on one H200)
#   PARTS=tests PYTEST_ARGS="tests/fft" bash scripts/gpu-check.sh
#   PARTS=bench BENCH_ENGINES=matmul BENCH_FULL=1 bash scripts/gpu-check.sh
# Parts: tests (everything but tests/device, on XDIST workers, default 8: about a minute),
# device (tests/device but test_matmul_gpu.py, code generation bound: each module on one of
# XDIST workers so its warm-up fixture builds once, 46 tests in 162-202 s on 16 cores),
# device_matmul (test_matmul_gpu.py alone, its warm-up on every CPU: 91 tests in 308 s with
# the code cached, longer on a fresh machine), examples, bench; sparse (not in the default set:
# it needs cuDSS carried, see docs/sparse.md; GPU tests of tests/sparse, examples/sparse, the
# sparse benchmark, --quick unless BENCH_FULL=1, SPARSE_CASES picks its systems). A machine
# that limits one command to 10 minutes runs them as separate commands (PARTS=tests,examples, then
# PARTS=device, then PARTS=device_matmul, then PARTS=bench).
# Logs go to $OUT (or ./gpu-check-out): summary.txt, pytest-gpu.txt, pytest-device.txt,
# pytest-device-matmul.txt, examples.txt, bench.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
PARTS=${PARTS:-tests,device,device_matmul,examples,bench}
has() { [[ ",$PARTS," == *",$1,"* ]]; }  # whether part $1 was asked for
XDIST=${XDIST:-8}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
# nvmath-python (a benchmark peer) looks for its libmathdx on the loader's path only
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
{
  echo "== gpu-check $(date -u +%FT%TZ) parts=$PARTS"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  python3 -m cuweave info
} > "$OUT/summary.txt" 2>&1

if has tests; then
  # the tensor engine's GPU tests need libcutensor, which the image lacks: carried and named
  # by CUWEAVE_CUTENSOR_PATH (docs/tensor.md), else left out of the default set
  skip_tensor=--ignore=tests/tensor; [[ -n ${CUWEAVE_CUTENSOR_PATH:-} ]] && skip_tensor=
  # likewise cuDSS (CUWEAVE_CUDSS_PATH; docs/sparse.md)
  skip_sparse=--ignore=tests/sparse; [[ -n ${CUWEAVE_CUDSS_PATH:-} ]] && skip_sparse=
  python3 -m pytest -q -m "gpu or multi_gpu" -p no:cacheprovider -n "$XDIST" -rfE \
    ${PYTEST_ARGS:---ignore=tests/device $skip_tensor $skip_sparse tests} > "$OUT/pytest-gpu.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== pytest -m gpu: rc=$rc"; tail -n 30 "$OUT/pytest-gpu.txt"; } >> "$OUT/summary.txt"
fi

if has device; then  # every module but test_matmul_gpu.py, one per xdist worker
  python3 -m pytest -q -m gpu -p no:cacheprovider -n "$XDIST" --dist loadfile -rfE tests/device \
    --ignore=tests/device/test_matmul_gpu.py > "$OUT/pytest-device.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== pytest -m gpu tests/device (but test_matmul_gpu.py): rc=$rc"
    tail -n 30 "$OUT/pytest-device.txt"; } >> "$OUT/summary.txt"
fi

if has device_matmul; then
  # on its own, without xdist: its module fixture generates every configuration at once in one
  # process per CPU (under xdist it got the worker's share, 2 of 16)
  python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
    tests/device/test_matmul_gpu.py > "$OUT/pytest-device-matmul.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== pytest -m gpu tests/device/test_matmul_gpu.py: rc=$rc"
    grep -h "warm_kernels:" "$OUT/pytest-device-matmul.txt" | head -n 5
    tail -n 30 "$OUT/pytest-device-matmul.txt"; } >> "$OUT/summary.txt"
fi

if has examples; then
  : > "$OUT/examples.txt"
  echo "== python -m cuweave demo" >> "$OUT/examples.txt"
  timeout 300 python3 -m cuweave demo --size 2048 >> "$OUT/examples.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  echo "== python -m cuweave demo: rc=$rc" | tee -a "$OUT/examples.txt" >> "$OUT/summary.txt"
  for f in $(find examples -name '*.py' | sort); do
    echo "== $f" >> "$OUT/examples.txt"
    timeout 300 python3 "$f" >> "$OUT/examples.txt" 2>&1
    rc=$?; [[ $rc -ne 0 ]] && status=1
    echo "== $f: rc=$rc" | tee -a "$OUT/examples.txt" >> "$OUT/summary.txt"
  done
fi

if has bench; then
  quick=--quick; [[ -n ${BENCH_FULL:-} ]] && quick=
  python3 benchmarks/run.py --engines "${BENCH_ENGINES:-matmul,fft,device_fft}" $quick \
    --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== benchmarks: rc=$rc"; grep -E "speedup|==|Error" "$OUT/bench.txt" | tail -n 60; } \
    >> "$OUT/summary.txt"
  tar -czf "$OUT/bench.tar.gz" -C "$OUT" bench bench.txt && rm -rf "$OUT/bench" "$OUT/bench.txt"
fi
if has sparse; then  # cuDSS: the nvidia-cudss-cu13 wheel, or CUWEAVE_CUDSS_PATH (docs/sparse.md)
  python3 -c "from cuweave._bindings import cudss; print('cuDSS', cudss.version(), \
    cudss.library_path())" >> "$OUT/summary.txt" 2>&1
  python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/sparse \
    > "$OUT/pytest-sparse.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== pytest -m gpu tests/sparse: rc=$rc"; tail -n 30 "$OUT/pytest-sparse.txt"; } \
    >> "$OUT/summary.txt"
  for f in examples/sparse/[a-z]*.py; do
    echo "== $f" >> "$OUT/examples-sparse.txt"
    timeout 300 python3 "$f" >> "$OUT/examples-sparse.txt" 2>&1
    rc=$?; [[ $rc -ne 0 ]] && status=1
    echo "== $f: rc=$rc" | tee -a "$OUT/examples-sparse.txt" >> "$OUT/summary.txt"
  done
  quick=--quick; [[ -n ${BENCH_FULL:-} ]] && quick=
  python3 benchmarks/run.py --engines sparse $quick --out "$OUT/bench-sparse" \
    > "$OUT/bench-sparse.txt" 2>&1
  rc=$?; [[ $rc -ne 0 ]] && status=1
  { echo "== sparse benchmarks: rc=$rc"; grep -E "speedup|==|Error|timed out" \
      "$OUT/bench-sparse.txt" | tail -n 40; } >> "$OUT/summary.txt"
fi
echo "== gpu-check status=$status" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $status
