#!/usr/bin/env bash
# bench/run.py's `rdkafka-perf` consumer: librdkafka's own rdkafka_performance -C (built by
# build.sh), tuned as librdkafka's INTRODUCTION.md and CONFIGURATION.md advise for throughput:
# the callback consume API (rd_kafka_consume_callback_queue: every message in the local queue
# per call, the fastest of librdkafka's three consume APIs by its INTRODUCTION.md; the tool's
# -B batch mode is not used because it calls rd_kafka_consume_batch on the first -p partition
# only, and its last call waits its full 1 s timeout for a batch that never fills),
# queued.min.messages=1000000 (the
# prefetch threshold that throttles small records at its default 100,000), 4 MiB per partition
# per fetch (fetch.message.max.bytes), 64 MiB per fetch (fetch.max.bytes) and a 256 MiB local
# queue (queued.max.messages.kbytes) so the prefetch is never what waits. It reads every
# partition by direct assignment (-p per partition, the legacy simple consumer) from the
# beginning until RECORDS, with no group and no commits, and prints run.py's RESULT line.
#
#   consume.sh BOOTSTRAP TOPIC PARTITIONS RECORDS [name=value ...]
#
# elapsed_s is this script's clock around the process (started before the client is created,
# as run.py's other clients; the tool prints its tally only at exit, so its teardown,
# consume_stop and rd_kafka_destroy, is inside too: a few ms); rdkafka_performance's own clock
# runs from the first message to the Nth, so first_s = elapsed_s - its time and run.py's
# "records/s after the 1st" is the tool's own figure. bytes are payload bytes (null keys).
set -euo pipefail
BIN="$(dirname "${BASH_SOURCE[0]}")/build/librdkafka/examples/rdkafka_performance"
[[ -x "$BIN" ]] || { echo "$BIN missing: run bench/peers/rdkafka-perf/build.sh" >&2; exit 1; }
(($# >= 4)) || { echo "usage: consume.sh BOOTSTRAP TOPIC PARTITIONS RECORDS [name=value ...]" >&2; exit 2; }
bootstrap="$1" topic="$2" partitions="$3" records="$4"
shift 4
args=(-C -t "$topic" -b "$bootstrap" -o beginning -c "$records" -i 600000
  -X queued.min.messages=1000000 -X fetch.message.max.bytes=4194304 -X fetch.max.bytes=67108864
  -X queued.max.messages.kbytes=262144)
for ((p = 0; p < partitions; p++)); do args+=(-p "$p"); done
for property in "$@"; do args+=(-X "$property"); done
start="$(date +%s%N)"
out="$("$BIN" "${args[@]}")"
end="$(date +%s%N)"
# "% N messages (B bytes) consumed in T ms: R msgs/s (M MB/s)": the last one is the final tally.
line="$(grep -E '^% [0-9]+ messages \([0-9]+ bytes\) consumed in [0-9]+ms' <<<"$out" | tail -n1)"
[[ -n "$line" ]] || { echo "no summary line from rdkafka_performance: $out" >&2; exit 1; }
read -r count bytes ms < <(sed -E 's/^% ([0-9]+) messages \(([0-9]+) bytes\) consumed in ([0-9]+)ms.*/\1 \2 \3/' <<<"$line")
awk -v n="$count" -v b="$bytes" -v ms="$ms" -v s="$start" -v e="$end" 'BEGIN {
  elapsed = (e - s) / 1e9; first = elapsed - ms / 1000; if (first < 0) first = 0
  printf "RESULT records=%d bytes=%d elapsed_s=%.6f first_s=%.6f\n", n, b, elapsed, first }'
