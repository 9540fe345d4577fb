#!/usr/bin/env bash
# A real fuzzing session over every target, one after another, each until it has run for
# SECONDS_PER_TARGET (default 600) or RUNS_PER_TARGET executions (default 10 million), whichever
# comes first. New inputs go to a scratch directory, not into the committed corpora; crashes go to
# fuzz/artifacts/<target>/. Prints one line per target and keeps each target's log.
#
#   fuzz/run-all.sh                      # every target
#   fuzz/run-all.sh frame scram          # some targets
#   SECONDS_PER_TARGET=60 fuzz/run-all.sh
#
# Needs nightly and cargo-fuzz (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")"

seconds=${SECONDS_PER_TARGET:-600}
runs=${RUNS_PER_TARGET:-10000000}
work=${FUZZ_WORK_DIR:-/tmp/sluice-fuzz}
mkdir -p "$work"

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

cargo +nightly fuzz build >/dev/null
status=0
for target in "${targets[@]}"; do
    mkdir -p "$work/$target" "artifacts/$target"
    log="$work/$target.log"
    start=$(date +%s)
    if ! "target/x86_64-unknown-linux-gnu/release/$target" \
        "$work/$target" "corpus/$target" \
        -max_total_time="$seconds" -runs="$runs" -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="artifacts/$target/" -print_final_stats=1 >"$log" 2>&1; then
        status=1
        echo "$target: FAILED (see $log and artifacts/$target/)"
        continue
    fi
    elapsed=$(($(date +%s) - start))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    peak=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
    echo "$target: ${elapsed}s, ${execs} executions, ${cov}, peak RSS ${peak} MB, no crash"
done
exit $status
