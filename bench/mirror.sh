#!/usr/bin/env bash
# `sluice mirror` against MirrorMaker 2 (connect-mirror 4.1.2 on Kafka Connect, dedicated mode),
# issue #17: the benchmark. Source = the single node, target = the 3-node cluster; datasets
# none-100b (100 B text, uncompressed) and zstd-1k (1 KiB text, zstd at the source and on the
# target); at_least_once and exactly_once (MM2: exactly.once.source.support=enabled); records/s
# over the whole run and in the steady state, CPU (user+sys) per million records, peak RSS
# (/usr/bin/time -v of the whole process, MM2's JVM included), and end-to-end latency p50/p99 of
# a paced phase through a continuously running mirror. The work is bench/mirror.py (its
# docstring says exactly what is measured and how); this script checks what it needs, runs it
# and writes the tables.
#
#   bench/mirror.sh LABEL [mirror.py options]       # results in bench/results/LABEL/
#   SOURCE=127.0.0.2:19092 TARGET=127.0.0.2:19192,127.0.0.2:29192,127.0.0.2:39192 \
#     bench/mirror.sh mirror-2026-12-02 --records-100b 1000000 --records-1k 150000 --runs 2
#   bench/mirror.sh smoke --runs 1 --records-100b 50000 --records-1k 10000 --latency-seconds 5
#
# Env: SOURCE (default 127.0.0.1:19092), TARGET (default 127.0.0.1:{1,2,3}9192), SLUICE (default
# the static musl binary, built by scripts/build-static.sh when missing). The MM2 jars go to
# bench/mm2/lib/ (git-ignored; resolved from bench/mm2/pom.xml when missing). Python needs
# confluent-kafka (`pip install confluent-kafka`): the sampler of the target's end offsets, the
# record counter and the latency consumer, the same for both tools.
#
# Output: bench/results/LABEL/runs.jsonl (one JSON line per run), report.md (medians with
# [min-max] and the sluice/MM2 ratios against the goals), one directory per run with the
# tool's configuration, stdout/stderr (MM2: mm2.log), `time -v` output and samples.csv (target
# end offsets and the tool's CPU every 0.2 s). Figures and the machine they ran on:
# BENCHMARKS.md, "The mirror (issue #17)".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
label=${1:?usage: bench/mirror.sh LABEL [mirror.py options]}
shift
export SLUICE=${SLUICE:-$root/target/x86_64-unknown-linux-musl/release/sluice}
[[ -x "$SLUICE" ]] || "$root/scripts/build-static.sh" >&2
python3 -c 'import confluent_kafka' 2> /dev/null || { echo "mirror.sh: pip install confluent-kafka" >&2; exit 2; }
python3 "$here/mirror.py" --label "$label" "$@"
python3 "$here/mirror_summary.py" "$here/results/$label" > "$here/results/$label/report.md"
cat "$here/results/$label/report.md"
