#!/usr/bin/env bash
# The producer benchmark harness (issue #16): the library Producer (`sluice-produce`) against
# Kafka's own `ProducerPerformance` (kafka-tools 4.1, through tests/kafka/broker.sh java), on the
# same broker, alternating runs, for the issue's datasets: 100 B records none and lz4, 1 KiB
# zstd; acks=all (idempotent) and acks=leader. Every run's JSON line goes to
# bench/results/producer-LABEL/runs.jsonl. Not part of CI; run it on a quiet machine.
#
#   bench/producer.sh [LABEL] [RECORDS]       default: producer-local, 2000000 records (100 B)
#
# The librdkafka, franz-go and confluent-kafka peers of the issue are not wired in yet.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LABEL="${1:-local}"
RECORDS="${2:-2000000}"
RUNS="${RUNS:-5}"
BOOTSTRAP="${SLUICE_BROKER:-127.0.0.1:19092}"
OUT="bench/results/producer-$LABEL"
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"

(cd bench/sluice && cargo build --release --bin sluice-produce)
SLUICE_PRODUCE=bench/sluice/target/release/sluice-produce

topic() { # a fresh topic per run, 6 partitions
  local name="bench-produce-$1-$RANDOM$RANDOM"
  tests/kafka/broker.sh java org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOTSTRAP" \
    --create --topic "$name" --partitions 6 --replication-factor 1 >/dev/null
  echo "$name"
}

java_run() { # codec size count acks linger
  local t
  t="$(topic java)"
  local line
  line="$(tests/kafka/broker.sh java org.apache.kafka.tools.ProducerPerformance --topic "$t" \
    --num-records "$3" --record-size "$2" --throughput -1 \
    --producer-props bootstrap.servers="$BOOTSTRAP" acks="$4" compression.type="$1" linger.ms="$5" \
    | tail -n1)"
  echo "{\"client\":\"java\",\"codec\":\"$1\",\"size\":$2,\"acks\":\"$4\",\"summary\":\"$line\"}"
}

sluice_run() { # codec size count acks linger
  local t
  t="$(topic sluice)"
  local acks="$4"
  [[ "$acks" == 1 ]] && acks=leader
  "$SLUICE_PRODUCE" "$BOOTSTRAP" "$t" "$3" "$2" "$1" "$acks" "$5" \
    | sed "s/^{/{\"codec\":\"$1\",\"acks\":\"$4\",/"
}

for dataset in "none 100 $RECORDS" "lz4 100 $RECORDS" "zstd 1024 $((RECORDS / 10))"; do
  read -r codec size count <<<"$dataset"
  for acks in all 1; do
    for run in $(seq "$RUNS"); do
      sluice_run "$codec" "$size" "$count" "$acks" 5 | tee -a "$OUT/runs.jsonl"
      java_run "$codec" "$size" "$count" "$acks" 5 | tee -a "$OUT/runs.jsonl"
    done
  done
done
echo "runs in $OUT/runs.jsonl"
