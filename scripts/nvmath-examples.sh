#!/usr/bin/env bash
# Run nvmath-python's example programs against cuweave, with the import renamed.
#
# The examples are NVIDIA's code and are not part of this repository: copy them into
# .nvmath-examples/ (git-ignored via .git/info/exclude), keeping nvmath-python's layout
# below examples/, e.g. .nvmath-examples/linalg/advanced/matmul/example01_numpy.py.
#
# Usage: bash scripts/nvmath-examples.sh [GLOB...]
#   GLOB selects examples by path relative to .nvmath-examples/ (default: all), e.g.
#   bash scripts/nvmath-examples.sh 'fft/*' 'linalg/advanced/matmul/example0[1-4]*'
# Environment: OUT (results go to $OUT/nvmath-examples.txt; default ./nvmath-examples-out/),
#   NVEX_TIMEOUT (seconds per example, default 120), NVEX_JOBS (examples run at once, default
#   1), PYTHON (default python3).
set -u

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$ROOT/.nvmath-examples"
OUTDIR="${OUT:-$PWD/nvmath-examples-out}"
TIMEOUT="${NVEX_TIMEOUT:-120}"
PY="${PYTHON:-python3}"
mkdir -p "$OUTDIR"
REPORT="$OUTDIR/nvmath-examples.txt"
: > "$REPORT"

if [ ! -d "$SRC" ]; then
    echo "no examples: $SRC is missing (copy nvmath-python's examples/ there)" | tee -a "$REPORT"
    exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/nvmath-examples.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# Renamed copy of the whole tree, so that examples importing sibling helper modules
# (e.g. fft/caching.py, fft/common.py) find them next to themselves.
(cd "$SRC" && find . -name '*.py' -print0) | while IFS= read -r -d '' f; do
    mkdir -p "$WORK/$(dirname "$f")"
    sed -E \
        -e 's/(^|[^A-Za-z0-9_.])nvmath([^A-Za-z0-9_-]|$)/\1cuweave\2/g' \
        -e 's/(^|[^A-Za-z0-9_.])nvmath([^A-Za-z0-9_-]|$)/\1cuweave\2/g' \
        "$SRC/$f" > "$WORK/$f"
done

# Select: all example programs (helper modules imported by other examples are run too;
# they are cheap and should simply pass), or those matching the globs.
mapfile -t ALL < <(cd "$SRC" && find . -name '*.py' | sed 's|^\./||' | LC_ALL=C sort)
SEL=()
for f in "${ALL[@]}"; do
    if [ "$#" -eq 0 ]; then SEL+=("$f"); continue; fi
    for g in "$@"; do
        # shellcheck disable=SC2053
        if [[ "$f" == $g ]]; then SEL+=("$f"); break; fi
    done
done

export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export MPLBACKEND=Agg

# One example: its verdict goes to $WORK/.res.<name> ("PASS|SKIP|FAIL<TAB>line" + detail lines).
run_one() {
    local f=$1 name log res start rc secs missing why
    name=$(echo "$f" | tr '/' '_')
    log="$WORK/.log.$name"; res="$WORK/.res.$name"
    start=$(date +%s)
    (cd "$WORK/$(dirname "$f")" && timeout "$TIMEOUT" "$PY" "$(basename "$f")") > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ "$rc" -eq 0 ]; then
        printf 'PASS\t%s (%ss)\n' "$f" "$secs" > "$res"; return
    fi
    missing=$(grep -oE "ModuleNotFoundError: No module named '[^']+'" "$log" | tail -n 1 \
              | sed -E "s/.*named '([^']+)'/\1/")
    if [ -n "$missing" ] && [ "${missing%%.*}" != cuweave ]; then
        printf 'SKIP\t%s (missing %s)\n' "$f" "$missing" > "$res"; return
    fi
    why="exit $rc"; [ "$rc" -eq 124 ] && why="timeout after ${TIMEOUT}s"
    {
        printf 'FAIL\t%s (%s, %ss): %s\n' "$f" "$why" "$secs" \
            "$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-200)"
        tail -n 5 "$log" | sed 's/^/      | /'
    } > "$res"
}

# NVEX_JOBS examples at a time (default 1: one GPU shared by small programs is fine for more).
JOBS="${NVEX_JOBS:-1}"
for f in "${SEL[@]+"${SEL[@]}"}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    run_one "$f" &
done
wait

npass=0; nfail=0; nskip=0
FAILS=(); SKIPS=()
for f in "${SEL[@]+"${SEL[@]}"}"; do
    res="$WORK/.res.$(echo "$f" | tr '/' '_')"
    head=$(head -n 1 "$res")
    kind=${head%%$'\t'*}; line=${head#*$'\t'}
    case "$kind" in
        PASS) npass=$((npass + 1)); echo "PASS  $line" >> "$REPORT" ;;
        SKIP) nskip=$((nskip + 1)); SKIPS+=("$line"); echo "SKIP  $line" >> "$REPORT" ;;
        *) nfail=$((nfail + 1)); FAILS+=("$line")
           { echo "FAIL  $line"; tail -n +2 "$res"; } >> "$REPORT" ;;
    esac
done

{
    echo
    echo "nvmath examples: $npass passed, $nfail failed, $nskip skipped"
    if [ "$nfail" -gt 0 ]; then
        echo "failures:"
        for x in "${FAILS[@]}"; do echo "  $x"; done
    fi
    if [ "$nskip" -gt 0 ]; then
        echo "skipped:"
        for x in "${SKIPS[@]}"; do echo "  $x"; done
    fi
} | tee -a "$REPORT"
echo "details: $REPORT"
exit 0
