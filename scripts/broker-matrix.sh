#!/usr/bin/env bash
# The broker-version matrix: Sluice's consume and TLS/SASL differential suites against other
# Apache Kafka versions, each a real KRaft broker from Maven Central jars.
#
#   scripts/broker-matrix.sh [--ci] [VERSION...]
#
# Default versions: 3.9.2 (the last 3.x), 4.1.2 (what the rest of the suite runs on) and 4.4.0
# (the newest 4.x Maven Central serves). For each version it resolves the jars
# (tests/kafka/broker.sh fetch, into .kafka/versions/VERSION/), starts a plain and a secured node
# on the version ports (21092, 21391-21400; see broker.sh) beside the default brokers, runs:
#
#   consume    the wire client against the broker (tests/tests/broker_consume.rs) and what the
#              version lacks (tests/tests/broker_versions.rs: KIP-848 on 3.9)
#   java       the differential test against the Java consumer (tests/tests/java_differential.rs)
#   connector  bounded reads through the `sluice` binary (connector/tests/bounded.rs)
#   tls-sasl   TLS, mTLS and SASL against the secured node, on ring and on the C-free provider
#              (certs-tests)
#   produce    the producer, its fault and its transaction suites (tests/tests/producer*.rs; see
#              run_produce_suites below)
#
# then stops that version's nodes, and writes the results to .kafka/matrix/results.md (a
# Markdown table: version x suite, with each suite's seconds) and prints it.
#
# --ci: what fits CI's time budget: the oldest version only, the consume, connector and produce
# suites (about 3 minutes after the jars are resolved; the full matrix takes about 15).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

ci=0
versions=()
for arg in "$@"; do
  case "$arg" in
    --ci) ci=1 ;;
    -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) versions+=("$arg") ;;
  esac
done
if [[ ${#versions[@]} -eq 0 ]]; then
  if ((ci)); then versions=(3.9.2); else versions=(3.9.2 4.1.2 4.4.0); fi
fi
suites=(consume java connector tls-sasl produce)
((ci)) && suites=(consume connector produce)

say() { echo "broker-matrix: $*" >&2; }
# A suite that cannot reach its broker fails instead of passing with SKIPPED lines.
export CI=true
RESULTS_DIR="$ROOT/.kafka/matrix"
mkdir -p "$RESULTS_DIR"
declare -A result

# run_suite VERSION NAME COMMAND...: runs a suite, records "pass (Ns)" or "FAIL (Ns)", keeps its log.
run_suite() {
  local version="$1" name="$2"; shift 2
  local log="$RESULTS_DIR/$version-$name.log" started=$SECONDS
  say "$version: $name: $*"
  if "$@" >"$log" 2>&1; then
    result["$version/$name"]="pass ($((SECONDS - started)) s)"
  else
    result["$version/$name"]="FAIL ($((SECONDS - started)) s, $log)"
    tail -n 30 "$log" >&2
  fi
  say "$version: $name: ${result["$version/$name"]}"
}

# The produce suites against the version's node: the producer (partitioner against the Java
# producer, codecs through the Java consumer, acks, errors), the idempotent producer under cut
# responses (through the fault proxy on this node's ports), and transactions (commit/abort as
# Java read_committed sees them, offsets with a group member, fencing, SIGKILL, the timeout),
# with SLUICE_TV1_BROKER on the same node. Kafka 3.9 has no transaction.version (0: the
# transaction protocol before KIP-890, as TV1); 4.x formats new clusters with 2. The leader-kill
# test needs the three-node cluster, which is 4.1 only: skipped here.
run_produce_suites() {
  local version="$1" tv=2
  [[ "$version" == 3.* ]] && tv=0
  run_suite "$version" produce env SLUICE_TV1_BROKER="$SLUICE_BROKER" SLUICE_BROKER_TRANSACTION_VERSION="$tv" \
    cargo test --workspace --locked -q --test producer --test producer_faults --test producer_transactions \
    -- --skip leader_kill_9_neither_loses_nor_duplicates
}

broker() { SLUICE_BROKER_VERSION="$1" tests/kafka/broker.sh "${@:2}"; }

# `--workspace` with `--test NAME`, not `-p PACKAGE`: the features are unified as in the main
# `cargo test --workspace`, so .ci/run's build is reused. With `-p` each suite rebuilt the
# crates under another feature set (about 5 of the CI part's 7 minutes). The suites build the
# `sluice` binary they run themselves (CARGO_BIN_EXE_sluice).
cargo test --workspace --locked -q --no-run
for version in "${versions[@]}"; do
  say "== Kafka $version"
  broker "$version" fetch
  trap 'broker "$version" stop || true; broker "$version" stop-secure || true' EXIT
  bootstrap="$(broker "$version" start)"
  export SLUICE_BROKER="$bootstrap" SLUICE_BROKER_KAFKA_VERSION="$version"
  for suite in "${suites[@]}"; do
    case "$suite" in
      consume)
        run_suite "$version" consume cargo test --workspace --locked -q --test broker_consume --test broker_versions ;;
      java)
        run_suite "$version" java cargo test --workspace --locked -q --test java_differential ;;
      connector)
        # Kafka 3.x keeps serving a deleted topic's log by its topic id until the deletion is
        # done, so this test's assumption (the run sees the recreation before its window ends)
        # does not hold there: the run reads the old topic's window, correctly, and finishes.
        skip=()
        [[ "$version" == 3.* ]] && skip=(-- --skip topic_recreated_during_a_bounded_run_fails_it)
        run_suite "$version" connector cargo test --workspace --locked -q --test bounded "${skip[@]}" ;;
      tls-sasl)
        certs="$ROOT/.kafka/versions/$version/secure/certs"
        cargo run -q --locked -p sluice-certs-tests --bin gen-certs -- "$certs" >/dev/null
        broker "$version" start-secure "$certs" >/dev/null
        export SLUICE_SECURE_DIR="$ROOT/.kafka/versions/$version/secure"
        run_suite "$version" tls-sasl bash -c "cargo test --locked -q -p sluice-certs-tests \
          && cargo test --locked -q -p sluice-certs-tests --no-default-features --features graviola"
        broker "$version" stop-secure
        unset SLUICE_SECURE_DIR ;;
      produce) run_produce_suites "$version" ;;
    esac
  done
  broker "$version" stop
  trap - EXIT
done

table="$RESULTS_DIR/results.md"
{
  printf '| Kafka |'; for suite in "${suites[@]}"; do printf ' %s |' "$suite"; done; echo
  printf '| - |'; for _ in "${suites[@]}"; do printf ' - |'; done; echo
  for version in "${versions[@]}"; do
    printf '| %s |' "$version"
    for suite in "${suites[@]}"; do printf ' %s |' "${result["$version/$suite"]:-not run}"; done
    echo
  done
  echo
  echo "Measured $(date -u +%Y-%m-%d) by scripts/broker-matrix.sh $*; logs in .kafka/matrix/."
} >"$table"
cat "$table"
failed=0
for key in "${!result[@]}"; do [[ "${result[$key]}" == FAIL* ]] && failed=1; done
exit "$failed"
