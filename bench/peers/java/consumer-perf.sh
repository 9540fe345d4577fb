#!/usr/bin/env bash
# Java peer: Kafka's own org.apache.kafka.tools.ConsumerPerformance (kafka-tools, the jars in
# .kafka/lib) with its defaults, run through tests/kafka/broker.sh java, its CSV turned into the
# benchmark's summary line.
#
#   consumer-perf.sh BOOTSTRAP TOPIC PARTITIONS RECORDS
#
# ConsumerPerformance subscribes with a fresh group (auto.offset.reset=earliest) instead of
# assigning partitions directly; elapsed_s is its fetch.time.ms, which leaves out the group
# join (rebalance.time.ms, also printed), so it compares with the direct-assignment clients.
# PARTITIONS is unused: the group is given every partition of the topic.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
[[ $# -eq 4 ]] || { echo "usage: $0 BOOTSTRAP TOPIC PARTITIONS RECORDS" >&2; exit 2; }
out="$("$root/tests/kafka/broker.sh" java org.apache.kafka.tools.ConsumerPerformance \
  --bootstrap-server "$1" --topic "$2" --messages "$4" --timeout 60000 \
  --group "bench-java-$$-$RANDOM")"
# Header: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
#         rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
awk -F', *' '
  NR == 1 { for (i = 1; i <= NF; i++) column[$i] = i; next }
  NF > 5 {
    printf "RESULT records=%d bytes=%.0f elapsed_s=%.6f rebalance_s=%.3f\n",
      $column["data.consumed.in.nMsg"], $column["data.consumed.in.MB"] * 1048576,
      $column["fetch.time.ms"] / 1000, $column["rebalance.time.ms"] / 1000
  }' <<<"$out"
