#!/usr/bin/env bash
# `sluice mirror` against MirrorMaker 2 (connect-mirror on Kafka Connect), issue #17: the same
# source topic copied from the single node into the three-node cluster by each, one after the
# other, each under /usr/bin/time -v. A SMOKE harness so far: it shows both run and gives rough
# figures; the quiet measurement (several runs, idle machine, 1 KiB zstd rows, latency) is the
# main session's.
#
#   bench/mirror.sh [MODE [RECORDS [SIZE]]]
#
#   MODE     at_least_once (default) or exactly_once (sluice: commit_mode; MM2:
#            exactly.once.source.support=enabled on the target)
#   RECORDS  records written into a fresh 3-partition source topic (default 200000)
#   SIZE     record size in bytes (default 100), written by the Java ProducerPerformance
#
# Env: SOURCE (default 127.0.0.1:19092), TARGET (default 127.0.0.1:19192,127.0.0.1:29192,
# 127.0.0.1:39192), SLUICE (default target/release/sluice, else target/debug/sluice), TIMEOUT
# (seconds per run, default 600). The MM2 jars: bench/mm2/lib/ (git-ignored; resolved from
# bench/mm2/pom.xml when missing).
#
# Output: one `RESULT tool=T mode=M records=N wall_s=W records_per_s=R user_s=U sys_s=S
# peak_rss_mib=P` line per tool. MM2's wall time runs from the JVM's start to the poll (every
# 0.5 s) that sees the target topic's end offsets reach RECORDS (with exactly_once they also
# count transaction markers, so MM2 may be stopped up to a few markers early); sluice's is the
# whole bounded run, and its records are the count its summary line gives.
#
# Smoke runs here (2026-12-02, 50,000 records of 100 B, the test build of sluice, a loaded 2-core
# machine; not a measurement): at_least_once sluice 2.8 s, 0.75 s CPU, 31 MiB peak RSS; MM2
# 45 s (mostly its startup), 23 s CPU, 1.6 GiB. exactly_once sluice 3.7 s, 29 MiB; MM2 80 s,
# 35 s CPU, 1.7 GiB.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
mode=${1:-at_least_once}
records=${2:-200000}
size=${3:-100}
source_bootstrap=${SOURCE:-127.0.0.1:19092}
target_bootstrap=${TARGET:-127.0.0.1:19192,127.0.0.1:29192,127.0.0.1:39192}
timeout=${TIMEOUT:-600}
sluice=${SLUICE:-}
if [[ -z "$sluice" ]]; then
  sluice="$root/target/release/sluice"
  [[ -x "$sluice" ]] || sluice="$root/target/debug/sluice"
fi
[[ -x "$sluice" ]] || { echo "no sluice binary at $sluice: cargo build --release -p sluice" >&2; exit 2; }
java_tool() { bash "$root/tests/kafka/broker.sh" java "$@"; }

if ! compgen -G "$here/mm2/lib/connect-mirror-*.jar" > /dev/null; then
  (cd "$here/mm2" && mvn -B -q dependency:copy-dependencies -DoutputDirectory=lib) >&2
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/mirror-bench.XXXXXX")
topic="bench-mirror-$$-$(date +%s)"
echo "source topic $topic: $records records of $size bytes; scratch $scratch" >&2
java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$source_bootstrap" --create --topic "$topic" \
  --partitions 3 --replication-factor 1 > /dev/null
java_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$records" --record-size "$size" \
  --throughput -1 --producer-props "bootstrap.servers=$source_bootstrap" acks=all linger.ms=5 > "$scratch/fill.log"

# The sum of the end offsets of `topic` on `bootstrap` (0 while it does not exist).
end_sum() {
  { java_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$1" --topic "$2" 2> /dev/null || true; } \
    | awk -F: '{ sum += $NF } END { print sum + 0 }'
}

# `time -v` report -> "user_s=U sys_s=S peak_rss_mib=P".
usage_of() {
  awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
    END { printf "user_s=%s sys_s=%s peak_rss_mib=%.1f", u, s, r / 1024 }' "$1"
}

# sluice mirror, bounded.
cat > "$scratch/sluice.json" << EOF
{"source": {"brokers": ["$source_bootstrap"]},
 "target": {"brokers": [$(echo "$target_bootstrap" | sed 's/[^,]*/"&"/g')]},
 "topics": ["$topic"], "target_topic": "sluice.{topic}", "commit_mode": "$mode", "create_topics": true}
EOF
start=$(date +%s.%N)
/usr/bin/time -v -o "$scratch/sluice.time" timeout "$timeout" "$sluice" mirror --config "$scratch/sluice.json" \
  --mode bounded > "$scratch/sluice.out" 2> "$scratch/sluice.err"
wall=$(echo "$(date +%s.%N) - $start" | bc)
mirrored=$(sed -n 's/^mirrored \([0-9]*\) records.*/\1/p' "$scratch/sluice.out")
echo "RESULT tool=sluice mode=$mode records=${mirrored:-0} wall_s=$wall records_per_s=$(echo "${mirrored:-0} / $wall" | bc)" \
  "$(usage_of "$scratch/sluice.time")"

# MirrorMaker 2, dedicated mode, src -> dst only; its target topic is `src.<topic>`.
eos=""
[[ "$mode" == exactly_once ]] && eos="dst.exactly.once.source.support = enabled"
cat > "$scratch/mm2.properties" << EOF
clusters = src, dst
src.bootstrap.servers = $source_bootstrap
dst.bootstrap.servers = $target_bootstrap
src->dst.enabled = true
src->dst.topics = $topic
dst->src.enabled = false
replication.factor = 3
offset-syncs.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.topic.acls.enabled = false
$eos
EOF
cat > "$scratch/log4j2.properties" << EOF
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = $scratch/mm2.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c: %m%n
EOF
start=$(date +%s.%N)
/usr/bin/time -v -o "$scratch/mm2.time" java -Xms256M -Xmx2G -Dlog4j2.configurationFile="$scratch/log4j2.properties" \
  -cp "$here/mm2/lib/*" org.apache.kafka.connect.mirror.MirrorMaker "$scratch/mm2.properties" \
  > "$scratch/mm2.out" 2>&1 &
timer=$!
trap 'pkill -TERM -P "$timer" 2> /dev/null || true' EXIT
deadline=$(( $(date +%s) + timeout ))
copied=0
while (( copied < records )) && (( $(date +%s) < deadline )); do
  sleep 0.5
  copied=$(end_sum "$target_bootstrap" "src.$topic")
done
wall=$(echo "$(date +%s.%N) - $start" | bc)
# time -v's child is the JVM: SIGTERM it, then time writes its report.
pkill -TERM -P "$timer" 2> /dev/null || true
wait "$timer" || true
echo "RESULT tool=mirrormaker2 mode=$mode records=$copied wall_s=$wall records_per_s=$(echo "$copied / $wall" | bc)" \
  "$(usage_of "$scratch/mm2.time")"
echo "logs in $scratch" >&2
