#!/usr/bin/env bash
# The Postgres destination next to the physical limit (issue #15; BENCHMARKS.md, "The Postgres
# destination"): `sluice read --mode bounded` of the json-200b dataset into a fresh PostgreSQL
# database, and, in the same round, psql loading the same rows from a file with
# `\copy ... FROM file WITH (FORMAT binary)`, the load alone. Prints every run and the medians.
#
#   bench/postgres_write.sh [ROUNDS [SLUICE [TOPIC [BOOTSTRAP]]]]
#
#   ROUNDS    default 3; SLUICE default target/x86_64-unknown-linux-musl/release/sluice (the static
#             binary of scripts/build-static.sh); TOPIC default bench-json-200b-2000000;
#             BOOTSTRAP default 127.0.0.1:19092.
#   POLICIES  env, default "append replace": one sluice run per write policy per round. `append`
#             is the CLI's default; a bounded run stages its rows in _sluice and its finish inserts
#             them into the topic's table (INSERT ... SELECT ... ON CONFLICT DO NOTHING, a second
#             pass over the rows on the server); `replace` renames the staging table into place.
#   CSV       env, default 1: also load the CSV export (`FORMAT csv`), the text parser's figure.
#   LABEL     env, default "static": the label of the sluice rows.
#   PGHOST/PGPORT/PGUSER/PGPASSWORD  default 127.0.0.1, 15432, sluice, sluice-test-password
#             (tests/postgres/server.sh). The user needs CREATEDB and CHECKPOINT (a superuser).
#
# A round:
#   1. per policy (the order rotates each round): CHECKPOINT and sync, CREATE DATABASE, then
#        PGPASSWORD=... /usr/bin/time -v sluice read --config C --mode bounded \
#          --dest postgres://USER@HOST:PORT/DB [--write-policy replace]
#      with C = {"brokers": [BOOTSTRAP], "topics": [TOPIC]}; rows = SELECT count(*) of the
#      topic's table afterwards, rows/s = rows / wall time (from before exec to exit). Sluice's
#      wall time includes connecting, reading from Kafka, decoding, rendering and encoding the
#      rows, and (append) the finish's INSERT ... SELECT: everything a user waits for.
#   2. the first round exports the table sluice wrote, once:
#        \copy (SELECT * FROM t) TO file WITH (FORMAT binary)   (and FORMAT csv with CSV=1)
#   3. in the database of the round's last sluice run: CHECKPOINT and sync,
#      CREATE TABLE t2 (LIKE t INCLUDING ALL) (the same columns and the same unique index on
#      _sluice_event_id), then
#        /usr/bin/time -v psql -c "\copy t2 FROM file WITH (FORMAT binary)"
#      rows/s = rows / wall time: the load alone (one COPY, one transaction; the server parses and
#      stores, psql only sends the file). Then the same for the CSV file into t3. DROP DATABASE.
# Every connection is plain TCP to HOST:PORT (PGSSLMODE=disable for psql: sluice's --dest URL
# uses no TLS unless ?sslmode= says so), so both pay the same transport.
#
# Columns printed per run: label round wall_s rows rows_per_s peak_rss_mib user_s sys_s pg_cpu_s
# load1. peak_rss_mib is /usr/bin/time's maximum RSS of the client process (sluice or psql), not
# the server's. pg_cpu_s is the PostgreSQL server's CPU over the run (utime+stime of the
# postmaster, its reaped children and its live children, from /proc: run this where the server
# runs, as root or the server's user); it counts everything the server did meanwhile, including
# another user's sessions. load1 is the 1-minute load average just before the run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=${1:-3}
sluice=${2:-$root/target/x86_64-unknown-linux-musl/release/sluice}
topic=${3:-bench-json-200b-2000000}
bootstrap=${4:-127.0.0.1:19092}
read -r -a policies <<< "${POLICIES:-append replace}"
csv=${CSV:-1}
label=${LABEL:-static}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-15432} PGUSER=${PGUSER:-sluice}
export PGPASSWORD=${PGPASSWORD:-sluice-test-password} PGSSLMODE=disable
[[ -x "$sluice" ]] || { echo "no sluice binary at $sluice (scripts/build-static.sh builds it)" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/postgres-write.XXXXXX")
databases=()
cleanup() {
  for db in "${databases[@]}"; do psql_ -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" > /dev/null 2>&1 || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
printf '{"brokers": ["%s"], "topics": ["%s"]}\n' "$bootstrap" "$topic" > "$scratch/sluice.json"
table="public.\"$topic\""

data_dir=$(psql_ -d postgres -tA -c "SHOW data_directory")
pg_cpu() { # the server's CPU seconds so far (see the header)
  local pm
  pm=$(head -1 "$data_dir/postmaster.pid")
  {
    awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat"
    # shellcheck disable=SC2013 # pids, one word each
    for child in $(cat /proc/"$pm"/task/*/children); do awk '{print $14 + $15}' "/proc/$child/stat" 2> /dev/null || true; done
  } | awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f\n", s / hz}'
}
settle() { psql_ -d postgres -c CHECKPOINT; sync; }
new_db() { # name
  psql_ -d postgres -c "CREATE DATABASE $1"
  databases+=("$1")
}
drop_db() { # name
  psql_ -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
}
# timed LABEL ROUND ROWS_SQL_DB ROWS_SQL COMMAND...: runs COMMAND under /usr/bin/time -v, counts
# the rows with ROWS_SQL in database ROWS_SQL_DB, prints and records one line.
timed() {
  local name=$1 round=$2 count_db=$3 count_sql=$4 start end cpu0 cpu1 load rows wall rss
  shift 4
  load=$(cut -d' ' -f1 /proc/loadavg)
  sleep 1 # the backends of the set-up statements have exited and been reaped
  cpu0=$(pg_cpu)
  start=$(date +%s.%N)
  if ! /usr/bin/time -v -o "$scratch/time" "$@" > "$scratch/stdout" 2> "$scratch/stderr"; then
    echo "$name failed:" >&2; tail -20 "$scratch/stderr" >&2; exit 1
  fi
  end=$(date +%s.%N)
  # The client's backend exits after the client does: read the server's CPU once it is reaped
  # (a backend that exits between the two reads of pg_cpu would be counted nowhere).
  sleep 1
  cpu1=$(pg_cpu)
  rows=$(psql_ -d "$count_db" -tA -c "$count_sql")
  wall=$(echo "$end - $start" | bc -l)
  rss=$(awk '/Maximum resident/ {print $NF}' "$scratch/time")
  printf '%s %d %.2f %d %.0f %d %s %s %.2f %s\n' "$name" "$round" "$wall" "$rows" "$(echo "$rows / $wall" | bc -l)" \
    "$((rss / 1024))" "$(awk '/User time/ {print $NF}' "$scratch/time")" \
    "$(awk '/System time/ {print $NF}' "$scratch/time")" "$(echo "$cpu1 - $cpu0" | bc -l)" "$load" \
    | tee -a "$scratch/runs"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores; sluice $sluice; topic $topic; rounds $rounds; policies ${policies[*]}"
echo "label round wall_s rows rows_per_s peak_rss_mib user_s sys_s pg_cpu_s load1"
for round in $(seq 1 "$rounds"); do
  # Rotate the policies' order, so that neither always follows the other.
  order=("${policies[@]:$(( (round - 1) % ${#policies[@]} ))}" "${policies[@]:0:$(( (round - 1) % ${#policies[@]} ))}")
  last_db=""
  for policy in "${order[@]}"; do
    db="bench_pgw_$$_${round}_$policy"
    settle
    new_db "$db"
    extra=()
    [[ "$policy" == replace ]] && extra=(--write-policy replace)
    timed "$label-$policy" "$round" "$db" "SELECT count(*) FROM $table" \
      "$sluice" read --config "$scratch/sluice.json" --dest "postgres://$PGUSER@$PGHOST:$PGPORT/$db" \
      --mode bounded "${extra[@]}"
    [[ -n "$last_db" ]] && drop_db "$last_db"
    last_db=$db
  done
  if [[ ! -f "$scratch/rows.bin" ]]; then
    psql_ -d "$last_db" -c "\\copy (SELECT * FROM $table) TO '$scratch/rows.bin' WITH (FORMAT binary)"
    [[ "$csv" == 1 ]] && psql_ -d "$last_db" -c "\\copy (SELECT * FROM $table) TO '$scratch/rows.csv' WITH (FORMAT csv)"
    echo "# export: rows.bin $(stat -c %s "$scratch/rows.bin") bytes$([[ "$csv" == 1 ]] && echo ", rows.csv $(stat -c %s "$scratch/rows.csv") bytes")"
  fi
  settle
  psql_ -d "$last_db" -c "CREATE TABLE t2 (LIKE $table INCLUDING ALL)"
  timed psql-copy-binary "$round" "$last_db" "SELECT count(*) FROM t2" \
    psql -X -v ON_ERROR_STOP=1 -d "$last_db" -c "\\copy t2 FROM '$scratch/rows.bin' WITH (FORMAT binary)"
  if [[ "$csv" == 1 ]]; then
    psql_ -d "$last_db" -c "DROP TABLE t2"
    settle
    psql_ -d "$last_db" -c "CREATE TABLE t3 (LIKE $table INCLUDING ALL)"
    timed psql-copy-csv "$round" "$last_db" "SELECT count(*) FROM t3" \
      psql -X -v ON_ERROR_STOP=1 -d "$last_db" -c "\\copy t3 FROM '$scratch/rows.csv' WITH (FORMAT csv)"
  fi
  drop_db "$last_db"
done

median() { # label column
  awk -v l="$1" -v c="$2" '$1 == l {print $c}' "$scratch/runs" | sort -g \
    | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}
echo "# medians: label runs wall_s rows_per_s peak_rss_mib user_s sys_s pg_cpu_s"
labels=()
for policy in "${policies[@]}"; do labels+=("$label-$policy"); done
labels+=(psql-copy-binary)
[[ "$csv" == 1 ]] && labels+=(psql-copy-csv)
for l in "${labels[@]}"; do
  printf 'median %s %d %.2f %.0f %.0f %.2f %.2f %.2f\n' "$l" "$(grep -c "^$l " "$scratch/runs")" "$(median "$l" 3)" \
    "$(median "$l" 5)" "$(median "$l" 6)" "$(median "$l" 7)" "$(median "$l" 8)" "$(median "$l" 9)"
done
# Per round, sluice's rows/s over psql's binary load's, then the median of those ratios.
for policy in "${policies[@]}"; do
  ratio=$(awk -v l="$label-$policy" '$1 == l {s[$2] = $5} $1 == "psql-copy-binary" {p[$2] = $5}
    END {for (r in s) if (r in p) print s[r] / p[r]}' "$scratch/runs" | sort -g \
    | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}')
  printf 'ratio %s/psql-copy-binary %.2f (median of the per-round ratios; goal >= 0.7)\n' "$label-$policy" "$ratio"
done
