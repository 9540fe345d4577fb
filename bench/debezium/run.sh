#!/usr/bin/env bash
# Kafka Connect (standalone) with the Debezium JDBC sink, writing a topic into a fresh PostgreSQL
# database: the peer of bench/postgres_write.sh (issue #15, BENCHMARKS.md "The Postgres
# destination"). One run: CREATE DATABASE, start ConnectStandalone under /usr/bin/time -v, poll
# the table's row count every second until it holds ROWS rows (or TIMEOUT seconds pass), stop the
# JVM (SIGTERM), print one result line, drop the database.
#
#   bench/debezium/run.sh [MODE [ROWS [TOPIC [TIMEOUT]]]]
#
#   MODE  string    (default) value.converter StringConverter (the record's JSON text as an
#                   optional string schema), then the HoistField$Value transform into a struct
#                   with one field `payload`: the sink writes a table with one text column holding
#                   the JSON. This is what the sink can take from schemaless JSON without a schema
#                   registry; it does not split fields into columns as Sluice does.
#         schemaless JsonConverter with schemas.enable=false (the records as they are): shows the
#                   sink's answer to schemaless JSON (it fails; the error is in the log).
#   ROWS  rows to wait for (default 2000000); TOPIC default bench-json-200b-2000000;
#   TIMEOUT default 900 s.
#
# Env: DBZ_TASKS (tasks.max, default 1: the sink's default), DBZ_BATCH (batch.size, default 500:
# the sink's default), DBZ_HEAP (default "-Xms256M -Xmx2G", what Kafka's connect-standalone.sh
# sets), DBZ_EXTRA (more sink properties, one per line, e.g.
# `dialect.postgres.unnest.insert.enabled=true`), PGHOST/PGPORT/PGUSER/PGPASSWORD (default 127.0.0.1, 15432, sluice,
# sluice-test-password: tests/postgres/server.sh), BOOTSTRAP (default 127.0.0.1:19092),
# KEEP_LOG=1 keeps the scratch directory (worker log) and prints its path.
#
# The jars: `mvn -B -q -f bench/debezium/pom.xml dependency:copy-dependencies
# -DoutputDirectory=lib` (bench/debezium/lib/, git-ignored; done here when missing).
#
# Output, one line: `RESULT mode=M rows=N first_row_s=F wall_s=W rows_per_s=R
# rows_per_s_from_first=R1 peak_rss_mib=P user_s=U sys_s=S pg_cpu_s=C` where wall_s runs from the
# JVM's start to the poll that saw ROWS rows (1 s polls), rows_per_s = rows / wall_s, and
# rows_per_s_from_first leaves the JVM's and the connector's startup out (from the first poll that
# saw a row). pg_cpu_s is the PostgreSQL server's CPU over the run (all its processes, from /proc:
# needs to run where the server runs, as root or its user).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode=${1:-string}
want=${2:-2000000}
topic=${3:-bench-json-200b-2000000}
timeout=${4:-900}
tasks=${DBZ_TASKS:-1}
batch=${DBZ_BATCH:-500}
heap=${DBZ_HEAP:--Xms256M -Xmx2G}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-15432} PGUSER=${PGUSER:-sluice}
export PGPASSWORD=${PGPASSWORD:-sluice-test-password}
bootstrap=${BOOTSTRAP:-127.0.0.1:19092}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

if ! compgen -G "$here/lib/debezium-connector-jdbc-*.jar" > /dev/null; then
  (cd "$here" && mvn -B -q dependency:copy-dependencies -DoutputDirectory=lib) >&2
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/debezium-run.XXXXXX")
db="bench_dbz_$$_$(date +%s)"
table="bench_json"
jvm=""
# Stops the JVM (the child of /usr/bin/time, which then writes its report) and waits for both.
stop_jvm() {
  if [[ -n "$jvm" ]] && kill -0 "$jvm" 2> /dev/null; then
    # shellcheck disable=SC2046
    kill $(cat /proc/"$jvm"/task/*/children) 2> /dev/null || true
    wait "$jvm" 2> /dev/null || true
  fi
  jvm=""
}
cleanup() {
  stop_jvm
  psql_ -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" > /dev/null 2>&1 || true
  if [[ -n "${KEEP_LOG:-}" ]]; then echo "scratch kept: $scratch" >&2; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
psql_ -d postgres -c "CREATE DATABASE $db" > /dev/null

# PostgreSQL's CPU seconds: the postmaster (with its reaped children) plus its live children.
pg_cpu() {
  local dir pm
  dir=$(psql_ -d postgres -tA -c "SHOW data_directory")
  pm=$(head -1 "$dir/postmaster.pid")
  {
    awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat"
    # shellcheck disable=SC2013 # pids, one word each
    for child in $(cat /proc/"$pm"/task/*/children); do awk '{print $14 + $15}' "/proc/$child/stat" 2> /dev/null || true; done
  } | awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f\n", s / hz}'
}

cat > "$scratch/log4j2.properties" << EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $scratch/connect.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
EOF

case "$mode" in
  string)
    converter="value.converter=org.apache.kafka.connect.storage.StringConverter"
    transforms=$'transforms=hoist\ntransforms.hoist.type=org.apache.kafka.connect.transforms.HoistField$Value\ntransforms.hoist.field=payload'
    ;;
  schemaless)
    converter=$'value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false'
    transforms=""
    ;;
  *) echo "unknown mode $mode (string or schemaless)" >&2; exit 2 ;;
esac

cat > "$scratch/worker.properties" << EOF
bootstrap.servers=$bootstrap
key.converter=org.apache.kafka.connect.storage.StringConverter
$converter
offset.storage.file.filename=$scratch/offsets
listeners=http://127.0.0.1:0
EOF

cat > "$scratch/sink.properties" << EOF
name=bench-dbz-$db
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=$tasks
topics=$topic
connection.url=jdbc:postgresql://$PGHOST:$PGPORT/$db
connection.username=$PGUSER
connection.password=$PGPASSWORD
insert.mode=insert
primary.key.mode=none
schema.evolution=basic
collection.name.format=$table
batch.size=$batch
consumer.override.auto.offset.reset=earliest
$transforms
${DBZ_EXTRA:-}
EOF

pg0=$(pg_cpu)
start=$(date +%s.%N)
# shellcheck disable=SC2086
/usr/bin/time -v -o "$scratch/time" java $heap -Dlog4j2.configurationFile="$scratch/log4j2.properties" \
  -cp "$here/lib/*" org.apache.kafka.connect.cli.ConnectStandalone \
  "$scratch/worker.properties" "$scratch/sink.properties" > "$scratch/stdout" 2>&1 &
jvm=$!
first="" done_at="" rows=0
while :; do
  sleep 1
  now=$(date +%s.%N)
  if ! kill -0 "$jvm" 2> /dev/null; then echo "the JVM exited early; log: $scratch/connect.log" >&2; KEEP_LOG=1; break; fi
  rows=$(psql_ -d "$db" -tA -c "SELECT count(*) FROM $table" 2> /dev/null || echo 0)
  if [[ -z "$first" && "$rows" -gt 0 ]]; then first=$now first_rows=$rows; fi
  if [[ "$rows" -ge "$want" ]]; then done_at=$now; break; fi
  if (( $(echo "$now - $start > $timeout" | bc) )); then echo "timeout after $timeout s at $rows rows" >&2; KEEP_LOG=1; break; fi
  if grep -q "Task threw an uncaught and unrecoverable exception\|is being killed and will not recover" "$scratch/connect.log" 2> /dev/null; then
    echo "the sink task failed; log: $scratch/connect.log" >&2
    grep -m1 -A12 "ERROR" "$scratch/connect.log" >&2 || true
    KEEP_LOG=1
    break
  fi
done
pg1=$(pg_cpu)
stop_jvm
rss=$(awk '/Maximum resident/ {print $NF}' "$scratch/time")
user=$(awk '/User time/ {print $NF}' "$scratch/time")
sys=$(awk '/System time/ {print $NF}' "$scratch/time")
if [[ -z "$done_at" ]]; then
  echo "RESULT mode=$mode rows=$rows incomplete peak_rss_mib=$((rss / 1024)) user_s=$user sys_s=$sys"
  exit 1
fi
wall=$(echo "$done_at - $start" | bc -l)
printf 'RESULT mode=%s rows=%d first_row_s=%.1f wall_s=%.2f rows_per_s=%.0f rows_per_s_from_first=%.0f peak_rss_mib=%d user_s=%s sys_s=%s pg_cpu_s=%.2f\n' \
  "$mode" "$rows" "$(echo "$first - $start" | bc -l)" "$wall" "$(echo "$rows / $wall" | bc -l)" \
  "$(echo "($rows - $first_rows) / ($done_at - $first)" | bc -l)" "$((rss / 1024))" "$user" "$sys" \
  "$(echo "$pg1 - $pg0" | bc -l)"
