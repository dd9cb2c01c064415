#!/usr/bin/env bash
# The one script behind examples/ci/github-actions.yml: every step of the recipe is a
# command of this script, and tests/test_ci_recipe.py runs those same steps end to end
# with tiny budgets, so the recipe cannot rot.
#
#   symfuzz-ci.sh replay          baseline entries that no longer reproduce are reported as fixed
#   symfuzz-ci.sh shard K N       shard K of N: the stored corpus first, then this shard's case indices
#   symfuzz-ci.sh merge           merge the shards, judge them (--fail-on), write the reports, keep the corpus
#   symfuzz-ci.sh nightly         one longer run judged against a reference torch (--fail-on regression)
#
# Settings (environment variables; defaults in brackets):
#   SYMFUZZ              the symfuzz command [symfuzz]
#   SYMFUZZ_OUT          where outputs go [symfuzz-ci]
#   SYMFUZZ_SEED         campaign seed, the same for every shard of one run [$GITHUB_RUN_ID or 0]
#   SYMFUZZ_BUDGET       fuzzing time per shard [10m]; SYMFUZZ_NIGHTLY_BUDGET for nightly [60m]
#   SYMFUZZ_LANE         compile lane [inductor-cpp]
#   SYMFUZZ_JOBS         worker processes per shard [2]
#   SYMFUZZ_CORPUS       the case corpus a CI cache carries between runs [.symfuzz-corpus]
#   SYMFUZZ_BASELINE     the known-findings baseline, checked in [symfuzz-baseline.json]
#   SYMFUZZ_FAIL_ON      which findings fail the merged run [new]
#   SYMFUZZ_REFERENCE_PYTHON  the reference environment's Python, for nightly (required there)
#   SYMFUZZ_FUZZ_ARGS    more `symfuzz fuzz` options, e.g. "--max-cases 8 --ops tanh,add"
#
# Exit codes are symfuzz's own (0 ok, 1 failing findings, 2 usage, 3 could not judge,
# 130/143 interrupted), except that a shard exits 0 for findings: the merge step judges them.
set -euo pipefail

SYMFUZZ=${SYMFUZZ:-symfuzz}
OUT=${SYMFUZZ_OUT:-symfuzz-ci}
SEED=${SYMFUZZ_SEED:-${GITHUB_RUN_ID:-0}}
LANE=${SYMFUZZ_LANE:-inductor-cpp}
JOBS=${SYMFUZZ_JOBS:-2}
CORPUS=${SYMFUZZ_CORPUS:-.symfuzz-corpus}
BASELINE=${SYMFUZZ_BASELINE:-symfuzz-baseline.json}
FAIL_ON=${SYMFUZZ_FAIL_ON:-new}
read -r -a EXTRA <<< "${SYMFUZZ_FUZZ_ARGS:-}"

baseline_args=()
[[ -f "$BASELINE" ]] && baseline_args=(--baseline "$BASELINE")

usage() {
    sed -n '2,9p' "$0" >&2
    exit 2
}

cmd=${1:-}
case "$cmd" in
replay)
    if [[ ! -f "$BASELINE" ]]; then
        echo "symfuzz-ci: no baseline at $BASELINE yet: nothing to replay"
        exit 0
    fi
    $SYMFUZZ replay --baseline "$BASELINE"
    ;;
shard)
    [[ $# -eq 3 ]] || usage
    k=$2 n=$3
    shard_out="$OUT/shard-$k"
    # A runner that keeps its workspace holds the last run here: this job is a new campaign
    # (symfuzz refuses an --out holding another run), so clear it, the corpus aside.
    if [[ -d "$shard_out" ]]; then find "$shard_out" -mindepth 1 -maxdepth 1 ! -name corpus -exec rm -rf {} +; fi
    mkdir -p "$shard_out/corpus"
    # Each shard appends to its own copy of the stored corpus; the merge step unites them.
    if [[ -d "$CORPUS" ]]; then cp -R "$CORPUS/." "$shard_out/corpus/"; fi
    code=0
    $SYMFUZZ fuzz --seed "$SEED" --shard "$k/$n" --budget "${SYMFUZZ_BUDGET:-10m}" --lane "$LANE" --jobs "$JOBS" \
        --corpus "$shard_out/corpus" "${baseline_args[@]}" --out "$shard_out" "${EXTRA[@]}" || code=$?
    # Findings are judged once, after the merge; anything else (2, 3, 130, 143) fails here.
    # (1 only when the gate itself said so: a crash of symfuzz must not pass as "findings".)
    if [[ $code -eq 1 ]] && grep -qE '"exit_code": 1,?$' "$shard_out/gate.json" 2>/dev/null; then code=0; fi
    exit "$code"
    ;;
merge)
    shopt -s nullglob
    shards=("$OUT"/shard-*)
    if [[ ${#shards[@]} -eq 0 ]]; then
        echo "symfuzz-ci: no shard outputs under $OUT" >&2
        exit 2
    fi
    rm -rf "$OUT/merged"
    code=0
    $SYMFUZZ merge "${shards[@]}" --out "$OUT/merged" "${baseline_args[@]}" --fail-on "$FAIL_ON" || code=$?
    if [[ -f "$OUT/merged/stats.json" ]]; then
        $SYMFUZZ report "$OUT/merged"
        # The united corpus is what the CI cache saves for the next run.
        mkdir -p "$CORPUS"
        if [[ -d "$OUT/merged/corpus" ]]; then cp -R "$OUT/merged/corpus/." "$CORPUS/"; fi
    fi
    exit "$code"
    ;;
nightly)
    if [[ -z "${SYMFUZZ_REFERENCE_PYTHON:-}" ]]; then
        echo "symfuzz-ci: nightly needs SYMFUZZ_REFERENCE_PYTHON (the Python of the last release's environment)" >&2
        exit 2
    fi
    mkdir -p "$CORPUS"
    rm -rf "$OUT/nightly"  # (a kept workspace holds the last night's run: tonight's is a new campaign)
    $SYMFUZZ fuzz --seed "$SEED" --budget "${SYMFUZZ_NIGHTLY_BUDGET:-60m}" --lane "$LANE" --jobs "$JOBS" \
        --corpus "$CORPUS" "${baseline_args[@]}" --reference-python "$SYMFUZZ_REFERENCE_PYTHON" \
        --fail-on regression --report --out "$OUT/nightly" "${EXTRA[@]}"
    ;;
*)
    usage
    ;;
esac
