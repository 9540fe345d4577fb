#!/usr/bin/env bash
# Checks the harness itself against a real broker: fetch, start, the Kafka tools, TxnWriter and
# DumpConsumer (with the properties the Rust tests rely on), stop; then the three-node cluster
# with a SIGKILL and a restart. Uses the same ports as broker.sh, so nothing else may run a
# broker meanwhile. Leaves nothing running. Prints "N passed, N failed" at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="$ROOT/tests/kafka/broker.sh"
WORK="$(mktemp -d)"
TOPIC="selftest-$$"
passed=0
failed=0

cleanup() {
  [[ -n "${writer_fd:-}" ]] && exec 3>&- || true
  "$B" stop >/dev/null 2>&1 || true
  "$B" stop-cluster >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

check() {
  local what="$1"; shift
  if "$@"; then
    echo "ok: $what"; passed=$((passed + 1))
  else
    echo "FAILED: $what"; failed=$((failed + 1))
  fi
}

# keys FILE PARTITION: the decoded keys of PARTITION's records in a DumpConsumer output.
keys() {
  grep "^{\"partition\":$2," "$1" | sed 's/.*"key":"\([^"]*\)".*/\1/' | while read -r k; do
    printf '%s\n' "$k" | base64 -d; echo
  done
}
# offsets FILE PARTITION: the offsets of PARTITION's records.
offsets() { grep "^{\"partition\":$2," "$1" | sed 's/.*"offset":\([0-9]*\).*/\1/'; }
# end FILE PARTITION: the end offset DumpConsumer reported for PARTITION.
end() { tail -n1 "$1" | sed "s/.*\"$2\":\([0-9]*\).*/\1/"; }

"$B" fetch
t0=$SECONDS
"$B" start >/dev/null
echo "single node ready in $((SECONDS - t0)) s"
check "start again reports the running broker" "$B" start

check "TopicCommand creates a topic" \
  "$B" java org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:19092 \
  --create --topic "$TOPIC-perf" --partitions 3 --replication-factor 1
check "ProducerPerformance writes 50000 records" \
  "$B" java org.apache.kafka.tools.ProducerPerformance --topic "$TOPIC-perf" --num-records 50000 \
  --record-size 100 --throughput -1 --producer-props bootstrap.servers=127.0.0.1:19092 acks=all

# TxnWriter with its last transaction open while we dump.
mkfifo "$WORK/writer.in"
"$B" java TxnWriter 127.0.0.1:19092 "$TOPIC" <"$WORK/writer.in" >"$WORK/writer.out" 2>"$WORK/writer.err" &
writer=$!
exec 3>"$WORK/writer.in"
writer_fd=1
for _ in $(seq 240); do
  grep -q READY "$WORK/writer.out" && break
  kill -0 "$writer" 2>/dev/null || break
  sleep 0.5
done
check "TxnWriter prints READY and nothing else" test "$(cat "$WORK/writer.out")" = READY
"$B" java DumpConsumer 127.0.0.1:19092 "$TOPIC" read_committed >"$WORK/rc.json"
"$B" java DumpConsumer 127.0.0.1:19092 "$TOPIC" read_uncommitted >"$WORK/ru.json"
exec 3>&-
writer_fd=
check "TxnWriter aborts the open transaction and exits 0 on EOF" wait "$writer"
"$B" java DumpConsumer 127.0.0.1:19092 "$TOPIC" read_committed >"$WORK/rc-after.json"

for p in 0 1 2; do keys "$WORK/rc.json" $p; done >"$WORK/rc.keys"
for p in 0 1 2; do keys "$WORK/ru.json" $p; done >"$WORK/ru.keys"
check "read_committed skips aborted and open transactions (t2 t3 t8 t9)" \
  bash -c "! grep -qE -- '-t[2389]-' '$WORK/rc.keys'"
check "read_uncommitted shows them" grep -qE -- '-t[2389]-' "$WORK/ru.keys"
for p in 0 1; do
  first_open="$(paste <(offsets "$WORK/ru.json" $p) <(keys "$WORK/ru.json" $p) | grep -- "-t9-" | head -n1 | cut -f1)"
  check "partition $p: read_committed end offset stops at the open transaction ($first_open)" \
    test "$(end "$WORK/rc.json" $p)" = "$first_open"
done
last2="$(offsets "$WORK/ru.json" 2 | tail -n1)"
check "partition 2 ends with a control marker (end $(end "$WORK/ru.json" 2) = last data $last2 + 2)" \
  test "$(end "$WORK/ru.json" 2)" = "$((last2 + 2))"
check "headers keep duplicate keys and null values" \
  grep -q '"headers":\[\["trace","YQ=="\],\["trace","Yg=="\],\["nullh",null\]\]' "$WORK/ru.json"
check "after the abort, read_committed end offsets move past the markers" \
  test "$(end "$WORK/rc-after.json" 0)" -gt "$(end "$WORK/ru.json" 0)"
check "TxnWriter refuses an existing topic" \
  bash -c "! '$B' java TxnWriter 127.0.0.1:19092 '$TOPIC' </dev/null >/dev/null 2>&1"

"$B" stop
check "stop is idempotent" "$B" stop

t0=$SECONDS
"$B" start-cluster >/dev/null
echo "cluster ready in $((SECONDS - t0)) s"
check "TopicCommand creates a replicated topic" \
  "$B" java org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:19092 \
  --create --topic "$TOPIC-rf3" --partitions 3
check "start refuses while the cluster runs" bash -c "! '$B' start 2>/dev/null"
check "kill-node 2 KILL" "$B" kill-node 2 KILL
t0=$SECONDS
check "restart-node 2" "$B" restart-node 2
echo "node 2 back in $((SECONDS - t0)) s"
check "all three brokers listed" bash -c \
  "'$B' java org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server 127.0.0.1:29092 | grep -c '(id: [123] ' | grep -qx 3"
"$B" stop-cluster

echo "selftest: $passed passed, $failed failed"
((failed == 0))
