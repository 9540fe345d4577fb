#!/usr/bin/env bash
# The long reliability soak (issue #8): the fault suites of `.ci/run` with many more rounds.
# Starts the single broker and the three-node cluster if they are not running, runs
#
#   crash points        SLUICE_CRASH_ROUNDS   (default 500)  connector/tests/crash_points.rs
#   broker failover     SLUICE_CLUSTER_ROUNDS (default 10 per fault kind: 60 node kills)
#                                                            connector/tests/cluster_failover.rs
#   network faults      SLUICE_SOAK_ROUNDS    (default 10 per fault kind)
#                                                            connector/tests/network_faults.rs
#   disk faults         once                                 connector/tests/disk_faults.rs
#   group workers       SLUICE_GROUP_ROUNDS   (default 10: kill -9, add, SIGTERM per round, both
#                                             group protocols; and the zombie)
#                                                            connector/tests/group.rs
#   postgres            SLUICE_PG_KILL_ROUNDS (default 100 kill -9), SLUICE_PG_CRASH_ROUNDS
#                       (default 90: each crash point 10 times)   connector/tests/postgres.rs
#   producer faults     SLUICE_PRODUCER_FAULT_ROUNDS (default 20 response cuts),
#                       SLUICE_PRODUCER_CLUSTER_ROUNDS (default 10 leader SIGKILLs)
#                                                            tests/tests/producer_faults.rs
#   sluice write        SLUICE_WRITE_KILLS    (default 100 kill -9 exactly once, 50 at least
#                                             once; and every fault point)
#                                                            connector/tests/write.rs
#   re-authentication   SLUICE_REAUTH_SECS    (default 60 s per mechanism: SCRAM, PLAIN,
#                                             OAUTHBEARER; and the continuous sluice read)
#                                                            tests/tests/reauthentication.rs,
#                                                            connector/tests/cloud_auth.rs
#
# one suite at a time (they share the brokers), and prints every `RELIABILITY ...` line the
# tests wrote: the figures TESTING.md's table records. The full log goes to target/soak.log.
# Needs root for the disk-fault suite (it mounts a tmpfs). Takes about an hour on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CI=true
export SLUICE_CRASH_ROUNDS="${SLUICE_CRASH_ROUNDS:-500}"
export SLUICE_CLUSTER_ROUNDS="${SLUICE_CLUSTER_ROUNDS:-10}"
export SLUICE_SOAK_ROUNDS="${SLUICE_SOAK_ROUNDS:-10}"
export SLUICE_GROUP_ROUNDS="${SLUICE_GROUP_ROUNDS:-10}"
export SLUICE_PG_KILL_ROUNDS="${SLUICE_PG_KILL_ROUNDS:-100}"
export SLUICE_PG_CRASH_ROUNDS="${SLUICE_PG_CRASH_ROUNDS:-90}"
export SLUICE_PRODUCER_FAULT_ROUNDS="${SLUICE_PRODUCER_FAULT_ROUNDS:-20}"
export SLUICE_PRODUCER_CLUSTER_ROUNDS="${SLUICE_PRODUCER_CLUSTER_ROUNDS:-10}"
export SLUICE_REAUTH_SECS="${SLUICE_REAUTH_SECS:-60}"
export SLUICE_WRITE_KILLS="${SLUICE_WRITE_KILLS:-100}"

tests/kafka/broker.sh fetch
tests/kafka/broker.sh start >/dev/null
tests/kafka/broker.sh start-cluster >/dev/null
if [[ ! -f .kafka/secure/certs/ca.pem ]]; then
  cargo run -q --locked -p sluice-certs-tests --bin gen-certs -- .kafka/secure/certs
fi
tests/kafka/broker.sh start-auth .kafka/secure/certs >/dev/null
if [[ -z "${SLUICE_POSTGRES_URL:-}" ]]; then
  # Starts a fresh one (tests/postgres/server.sh wipes its data directory at each start).
  SLUICE_POSTGRES_URL="$(tests/postgres/server.sh start)"
  export SLUICE_POSTGRES_URL
fi

log=target/soak.log
mkdir -p target
: >"$log"
status=0
for suite in crash_points cluster_failover network_faults disk_faults group postgres write; do
  echo "== soak: $suite" | tee -a "$log"
  started=$SECONDS
  if ! cargo test --locked -p sluice --test "$suite" -- --nocapture --test-threads=1 >>"$log" 2>&1; then
    echo "soak: $suite FAILED (see $log)" >&2
    status=1
  fi
  echo "   $suite: $((SECONDS - started)) s" | tee -a "$log"
done
echo "== soak: producer_faults" | tee -a "$log"
started=$SECONDS
if ! cargo test --locked -p sluice-tests --test producer_faults -- --nocapture --test-threads=1 >>"$log" 2>&1; then
  echo "soak: producer_faults FAILED (see $log)" >&2
  status=1
fi
echo "   producer_faults: $((SECONDS - started)) s" | tee -a "$log"
echo "== soak: re-authentication ($SLUICE_REAUTH_SECS s per run)" | tee -a "$log"
started=$SECONDS
if ! cargo test --locked -p sluice-tests --test reauthentication -- --nocapture >>"$log" 2>&1 \
   || ! cargo test --locked -p sluice --test cloud_auth -- --nocapture >>"$log" 2>&1; then
  echo "soak: re-authentication FAILED (see $log)" >&2
  status=1
fi
echo "   re-authentication: $((SECONDS - started)) s" | tee -a "$log"
echo "== soak results"
grep -h '^RELIABILITY \|^REAUTH ' "$log" || true
exit "$status"
