#!/usr/bin/env bash
# Two `sluice` binaries side by side on the connector's bounded read (BENCHMARKS.md, "The write
# path"): `sluice read --mode bounded` of the json-200b dataset into a fresh directory, the two
# binaries alternating, each run under /usr/bin/time -v. Prints every run and the medians of
# wall time, rows/s (rows written / wall time) and peak RSS.
#
#   bench/connector-ab.sh BEFORE AFTER [ROUNDS [TOPIC [BOOTSTRAP]]]
#
# The topic must exist: `python3 bench/run.py --sections connector` writes it, or
#   make-dataset 127.0.0.1:19092 bench-json-200b-2000000 4 2000000 json200 none 500
# (bench/sluice). The output directory is under $TMPDIR (default /tmp): it is on the disk being
# measured, and is deleted after each run.
set -euo pipefail
before=$1
after=$2
rounds=${3:-5}
topic=${4:-bench-json-200b-2000000}
bootstrap=${5:-127.0.0.1:19092}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/connector-ab.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
printf '{"brokers": ["%s"], "topics": ["%s"]}\n' "$bootstrap" "$topic" > "$scratch/sluice.json"

run() { # label binary
  local dest="$scratch/out" start end rows wall rss
  rm -rf "$dest" && mkdir -p "$dest"
  start=$(date +%s.%N)
  /usr/bin/time -v "$2" read --config "$scratch/sluice.json" --dest "$dest" --mode bounded \
    > "$scratch/stdout" 2> "$scratch/time"
  end=$(date +%s.%N)
  rows=$(cat "$dest/$topic"/segments/* | wc -l)
  wall=$(echo "$end - $start" | bc -l)
  rss=$(awk '/Maximum resident/ {print $NF}' "$scratch/time")
  printf '%s %.2f %.0f %d %s %s\n' "$1" "$wall" "$(echo "$rows / $wall" | bc -l)" "$((rss / 1024))" \
    "$(awk '/User time/ {print $NF}' "$scratch/time")" "$(awk '/System time/ {print $NF}' "$scratch/time")" \
    | tee -a "$scratch/runs"
  rm -rf "$dest"
}

echo "label wall_s rows_per_s peak_rss_mib user_s sys_s"
for round in $(seq 1 "$rounds"); do
  # Alternate which one goes first, so neither always follows the other's writeback.
  if (( round % 2 )); then run before "$before"; run after "$after"; else run after "$after"; run before "$before"; fi
done
median() { # column of $scratch/runs, for label $1
  awk -v l="$1" -v c="$2" '$1 == l {print $c}' "$scratch/runs" | sort -g \
    | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}
for label in before after; do
  printf '%s: median wall %.2f s, %.0f rows/s, peak RSS %.0f MiB (%d runs)\n' "$label" "$(median "$label" 2)" \
    "$(median "$label" 3)" "$(median "$label" 4)" "$(grep -c "^$label " "$scratch/runs")"
done
