#!/usr/bin/env bash
# The producer benchmark (issue #16), short form of bench/producer.py: Sluice's library
# Producer (`sluice-produce`) against librdkafka (the rdkafka crate's producer and librdkafka's
# own rdkafka_performance -P), the Java client's ProducerPerformance, franz-go and Confluent's
# confluent-kafka crate, on the same broker, alternating rounds, for 100 B records none and lz4
# and 1 KiB zstd, acks=all (idempotent) and acks=leader, then a latency run per client
# (10,000 records/s for 10 s, linger_ms=0). Every run's JSON line goes to
# bench/results/producer-LABEL/runs.jsonl; bench/producer_summary.py writes the medians,
# ratios, report.md and chart.svg beside it. Not part of CI; quote only a quiet machine's run.
#
#   bench/producer.sh [LABEL] [RECORDS]     default: local, 2000000 records (100 B; 1 KiB: a tenth)
#
# Environment: RUNS (measured rounds, default 5), WARMUP (default 1), SLUICE_BROKER (bootstrap,
# default 127.0.0.1:19092), CLIENTS (comma-separated, default all), and any further
# bench/producer.py option in PRODUCER_ARGS (e.g. "--no-build --update-benchmarks-md").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck disable=SC2086 # PRODUCER_ARGS is a list of options
exec python3 bench/producer.py --label "${1:-local}" --records "${2:-2000000}" --runs "${RUNS:-5}" \
  --warmup "${WARMUP:-1}" --bootstrap "${SLUICE_BROKER:-127.0.0.1:19092}" \
  ${CLIENTS:+--clients "$CLIENTS"} ${PRODUCER_ARGS:-}
