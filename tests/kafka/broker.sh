#!/usr/bin/env bash
# Real Kafka brokers for Sluice's tests, run from Maven Central jars (no Docker, no tarball).
#
#   broker.sh fetch                 resolve the jars into .kafka/lib (skipped when up to date)
#   broker.sh start                 one KRaft combined node: 127.0.0.1:19092 (controller 19093), plus a
#                                   listener on 19089 advertised as 127.0.0.1:19088, where a test's
#                                   fault-injecting proxy listens (so clients stay behind the proxy)
#   broker.sh stop                  stop it (TERM, then KILL after a bound); idempotent
#   broker.sh start-cluster         three combined nodes: 127.0.0.1:{1,2,3}9192 (controllers {1,2,3}9193),
#                                   replication factor 3, min.insync.replicas 2; runs beside `start`
#   broker.sh stop-cluster          stop all three; idempotent
#   broker.sh kill-node N [TERM|KILL]   signal cluster node N (default TERM) and wait for it to exit
#   broker.sh restart-node N [--alone]  start node N again: same command, same dirs, no reformat;
#                                   waits for all three nodes in metadata unless --alone
#   broker.sh java MAIN [ARGS...]   run a class from tests/java/ or .kafka/lib/ (compiles tests/java/ if stale)
#   broker.sh start-secure CERT_DIR a separate secured KRaft node (TLS, mTLS, SASL listeners) using the
#                                   certificates gen-certs wrote into CERT_DIR; ports in .kafka/secure/ports.env
#   broker.sh stop-secure           stop it; idempotent
#   broker.sh start-tv1             a separate KRaft node formatted with transaction.version=1 (the
#                                   transaction protocol before KIP-890): 127.0.0.1:19492 (controller
#                                   19493); aborts timed-out transactions within a second
#   broker.sh stop-tv1              stop it; idempotent
#   broker.sh start-auth CERT_DIR   a node for re-authentication and OIDC tests (ports 19591-19597):
#                                   connections.max.reauth.ms 5000 on SCRAM, PLAIN and OAUTHBEARER
#                                   listeners, the last validating JWTs against the JWKS of the fake
#                                   identity provider tests/oauth/fake_idp.py, started with it
#   broker.sh stop-auth             stop it and its fake identity provider; idempotent
#   broker.sh status                which nodes are running
#
# Another Kafka version (the broker-version matrix, scripts/broker-matrix.sh): with
# SLUICE_BROKER_VERSION=X.Y.Z, `fetch`, `start`, `stop`, `start-secure`, `stop-secure` and `status`
# work on that version's jars and nodes in .kafka/versions/X.Y.Z/ on ports 2000 higher (single
# node 127.0.0.1:21092, controller 21093, PROXIED 21089 advertised as 21088; secured listeners
# 21391-21400, controller 21393), beside the default nodes. `java` keeps using the default jars
# (the Java tools are the tests' second opinion, whatever the broker).
#
# Everything lives in <repo>/.kafka/ (git-ignored, reused across runs):
#   lib/            jars; lib/.fetched holds the hash of the POM they were resolved from
#   java-classes/   tests/java/*.java compiled
#   single/         the single node: server.properties, data/ (fresh each start), logs/, broker.pid
#   cluster/nodeN/  the same per cluster node, plus the command line for restart-node
#   tv1/            the transaction.version=1 node: the same files as single/
#   secure/         the secured node: the same files, plus ports.env (LISTENER=host:port lines and
#                   CERT_DIR=...); certs/ inside it, when gen-certs writes there, is left alone
#   auth/           the re-authentication node: the same files, ports.env, idp.pid, idp.log
# stdout carries only results (the bootstrap address, a tool's own output); progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The physical path: broker processes are found by the config path in their command line, which
# must match however .kafka was reached (a worktree may link it to the main checkout's).
HOME_DIR="$(cd "$ROOT/.kafka" 2>/dev/null && pwd -P || echo "$ROOT/.kafka")"
LIB="$HOME_DIR/lib"
CLASSES="$HOME_DIR/java-classes"
POM="$ROOT/tests/kafka/pom.xml"
JAVA_SRC="$ROOT/tests/java"
SINGLE="$HOME_DIR/single"
CLUSTER="$HOME_DIR/cluster"
SECURE="$HOME_DIR/secure"
TV1="$HOME_DIR/tv1"
AUTH="$HOME_DIR/auth"
# SLUICE_BROKER_HOST: another loopback address (127.0.0.2) for a second set of plaintext nodes on
# the same ports beside a running set, as when a CI check runs beside a working checkout (the
# secured nodes' certificates name 127.0.0.1 only).
HOST="${SLUICE_BROKER_HOST:-127.0.0.1}"
TV1_BOOTSTRAP="$HOST:19492"
CLUSTER_BOOTSTRAP="$HOST:19192,$HOST:29192,$HOST:39192"
START_TIMEOUT="${SLUICE_BROKER_START_TIMEOUT:-90}"   # seconds until the broker(s) must answer metadata
STOP_TIMEOUT="${SLUICE_BROKER_STOP_TIMEOUT:-30}"     # seconds between SIGTERM and SIGKILL
# SLUICE_BROKER_HEAP: the brokers' maximum heap (512m; bench/idle_partitions.py's 10,000
# partitions need more: 2g).
BROKER_HEAP="${SLUICE_BROKER_HEAP:-512m}"
[[ "$BROKER_HEAP" =~ ^[0-9]+[mg]$ ]] || { echo "broker.sh: error: SLUICE_BROKER_HEAP must look like 512m or 2g (got '$BROKER_HEAP')" >&2; exit 1; }
BROKER_JVM_OPTS=(-Xms256m "-Xmx$BROKER_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true)

say() { echo "broker.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }
[[ "$HOST" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SLUICE_BROKER_HOST must be a loopback address 127.x.y.z (got '$HOST')"

# The jars the Java tools (`java`) are compiled and run with: always the default version's.
TOOLS_LIB="$LIB"
VERSION="${SLUICE_BROKER_VERSION:-}"
PORT_OFFSET=0
if [[ -n "$VERSION" ]]; then
  [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SLUICE_BROKER_VERSION must be X.Y.Z (got '$VERSION')"
  VERSION_HOME="$HOME_DIR/versions/$VERSION"
  LIB="$VERSION_HOME/lib"
  SINGLE="$VERSION_HOME/single"
  SECURE="$VERSION_HOME/secure"
  PORT_OFFSET=2000
fi
PORT_BROKER=$((19092 + PORT_OFFSET))
PORT_CONTROLLER=$((19093 + PORT_OFFSET))
PORT_PROXIED=$((19089 + PORT_OFFSET))
PORT_PROXY=$((19088 + PORT_OFFSET))
SINGLE_BOOTSTRAP="$HOST:$PORT_BROKER"

# ---------------------------------------------------------------------------------------------
# fetch

pom_hash() {
  if [[ -n "$VERSION" ]]; then
    { cat "$POM"; echo "kafka.version=$VERSION"; } | sha256sum | cut -d' ' -f1
  else
    sha256sum "$POM" | cut -d' ' -f1
  fi
}

jars_present() {
  [[ -f "$LIB/.fetched" && "$(cat "$LIB/.fetched")" == "$(pom_hash)" ]] && compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null
}

cmd_fetch() {
  if jars_present; then
    say "jars up to date in $LIB"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (install maven)"
  say "resolving Kafka jars from $POM into $LIB"
  local started=$SECONDS tmp="$HOME_DIR/lib.tmp"
  rm -rf "$tmp"
  mkdir -p "$HOME_DIR"
  local version_flag=() log="$HOME_DIR/fetch.log"
  if [[ -n "$VERSION" ]]; then
    version_flag=(-Dkafka.version="$VERSION")
    mkdir -p "$VERSION_HOME"
    tmp="$VERSION_HOME/lib.tmp"
    log="$VERSION_HOME/fetch.log"
    rm -rf "$tmp"
  fi
  if ! mvn -B -q -f "$POM" "${version_flag[@]}" dependency:copy-dependencies -DoutputDirectory="$tmp" \
      >"$log" 2>&1; then
    cat "$log" >&2
    die "mvn dependency:copy-dependencies failed for Kafka ${VERSION:-of the POM} (log: $log)"
  fi
  # Kafka 3.x names its own SLF4J binding (reload4j) beside ours (log4j2): two bindings, and the
  # one SLF4J picks would log nowhere. Keep ours.
  rm -f "$tmp"/slf4j-reload4j-*.jar
  pom_hash >"$tmp/.fetched"
  rm -rf "$LIB"
  mv "$tmp" "$LIB"
  say "resolved $(find "$LIB" -name '*.jar' | wc -l) jars in $((SECONDS - started)) s"
}

require_jars() {
  jars_present || die "Kafka jars missing or stale in $LIB: run '$0 fetch' first"
  command -v java >/dev/null || die "java not found (Java 17 is required)"
}

# ---------------------------------------------------------------------------------------------
# Shared pieces: logging configs, process bookkeeping, readiness

write_log_configs() {
  mkdir -p "$HOME_DIR"
  # Broker: everything at INFO into ${kafka.logs.dir}/server.log; the console (redirected to
  # console.log by us) only gets errors.
  cat >"$HOME_DIR/log4j2-broker.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = CONSOLE
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = ERROR
appender.server.type = File
appender.server.name = SERVER
appender.server.fileName = ${sys:kafka.logs.dir}/server.log
appender.server.append = true
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRefs = console, server
rootLogger.appenderRef.console.ref = CONSOLE
rootLogger.appenderRef.server.ref = SERVER
EOF
  # Tools and test programs: warnings and errors on stderr, nothing on stdout.
  cat >"$HOME_DIR/log4j2-tools.properties" <<'EOF'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
# The reliability tests' producer rides out broker failures; the client's per-retry warnings
# would drown the test output.
logger.clients.name = org.apache.kafka.clients
logger.clients.level = ERROR
EOF
  # Short timeouts for the readiness probe, so one attempt never hangs for a minute.
  cat >"$HOME_DIR/probe.properties" <<'EOF'
request.timeout.ms=3000
default.api.timeout.ms=5000
socket.connection.setup.timeout.ms=1000
socket.connection.setup.timeout.max.ms=2000
reconnect.backoff.max.ms=500
EOF
}

# A random Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what
# `StorageTool random-uuid` prints), without starting a JVM. Kafka avoids ids starting with '-'.
random_cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" != -* && "$id" != AAAAAAAAAAAAAAAAAAAAA[AQ] ]] && { echo "$id"; return; }
  done
}

# pid_alive PIDFILE: true when PIDFILE names a live Kafka broker process.
pid_alive() {
  local pidfile="$1" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled pid.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'
}

port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

tools_java() {
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$HOME_DIR/log4j2-tools.properties" -cp "$LIB/*" "$@"
}

# format DIR CLUSTER_ID [--standalone]: a fresh storage directory for the node in DIR.
format_storage() {
  local dir="$1" id="$2"; shift 2
  rm -rf "$dir/data"
  tools_java kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" "$@" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting $dir failed"; }
}

# launch DIR: start the broker whose files are in DIR, in the background, and record its pid.
# The first launch saves the command line (NUL separated) in DIR/command; restart-node replays
# that file, so a restarted node gets exactly the same command, config and directories.
launch() {
  local dir="$1" cmd=()
  mkdir -p "$dir/logs"
  if [[ -f "$dir/command" ]]; then
    mapfile -d '' -t cmd <"$dir/command"
  else
    cmd=(java "${BROKER_JVM_OPTS[@]}" ${EXTRA_JVM_OPTS[@]+"${EXTRA_JVM_OPTS[@]}"}
      -Dlog4j2.configurationFile="$HOME_DIR/log4j2-broker.properties"
      -Dkafka.logs.dir="$dir/logs"
      -cp "$LIB/*" kafka.Kafka "$dir/server.properties")
    printf '%s\0' "${cmd[@]}" >"$dir/command"
  fi
  # A simple command run with & execs java in the forked shell, so $! is the JVM's pid.
  "${cmd[@]}" </dev/null >>"$dir/logs/console.log" 2>&1 &
  echo $! >"$dir/broker.pid"
}

# brokers_listed BOOTSTRAP: the ids of the unfenced brokers in the metadata that BOOTSTRAP
# serves, one per line.
brokers_listed() {
  # The default version's tool (Kafka 3.x has it elsewhere); its client talks to any version.
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$HOME_DIR/log4j2-tools.properties" -cp "$TOOLS_LIB/*" \
    org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" \
    --command-config "$HOME_DIR/probe.properties" 2>/dev/null \
    | grep -v 'isFenced: true' | sed -n 's/^[^ ]* (id: \([0-9]*\) rack: .*/\1/p' | sort -u || true
}

# wait_ready BOOTSTRAP EXPECTED_IDS DIR...: poll until the metadata lists every id in
# EXPECTED_IDS (space separated); on timeout, show the logs of DIR... and fail.
wait_ready() {
  local bootstrap="$1" expected="$2"; shift 2
  local deadline=$((SECONDS + START_TIMEOUT)) listed id missing dir
  while :; do
    listed=" $(brokers_listed "$bootstrap" | tr '\n' ' ')"
    missing=""
    for id in $expected; do [[ "$listed" == *" $id "* ]] || missing+=" $id"; done
    [[ -z "$missing" ]] && return 0
    for dir in "$@"; do
      pid_alive "$dir/broker.pid" || { say "broker in $dir exited during startup"; show_logs "$@"; exit 1; }
    done
    if ((SECONDS >= deadline)); then
      say "brokers${missing} not in metadata after ${START_TIMEOUT} s"
      show_logs "$@"
      exit 1
    fi
    sleep 1
  done
}

show_logs() {
  local dir
  for dir in "$@"; do
    say "---- tail of $dir/logs/server.log"
    tail -n 40 "$dir/logs/server.log" >&2 2>/dev/null || true
    if [[ -s "$dir/logs/console.log" ]]; then
      say "---- tail of $dir/logs/console.log"
      tail -n 20 "$dir/logs/console.log" >&2
    fi
  done
}

# broker_pids DIR: pids of the brokers running with DIR/server.properties: the one in the pid
# file, and any whose pid file was lost (found by their exact command line).
broker_pids() {
  local dir="$1" cmdline file
  for file in $(grep -slF "$dir/server.properties" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    cmdline="$(tr '\0' ' ' <"$file" 2>/dev/null)" || continue
    [[ "$cmdline" == *" kafka.Kafka $dir/server.properties "* ]] || continue
    file="${file#/proc/}"
    echo "${file%/cmdline}"
  done
  return 0
}

# stop_dirs SIGNAL DIR...: signal each running broker in DIR..., wait up to STOP_TIMEOUT for
# them all to exit, SIGKILL the rest, remove the pid files.
stop_dirs() {
  local signal="$1"; shift
  local dir pid pids=() deadline
  for dir in "$@"; do
    for pid in $(broker_pids "$dir"); do
      kill "-$signal" "$pid" 2>/dev/null || true
      pids+=("$pid")
    done
  done
  deadline=$((SECONDS + STOP_TIMEOUT))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        say "pid $pid still running after ${STOP_TIMEOUT} s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
      else
        sleep 0.2
      fi
    done
  done
  for dir in "$@"; do rm -f "$dir/broker.pid"; done
  return 0
}

common_props() {
  cat <<EOF
process.roles=broker,controller
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=2
num.io.threads=2
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
# Consumer group tests run rebalances in seconds, not the production 45 s session timeouts:
# classic sessions from 2 s, KIP-848 sessions from 2 s with heartbeats from 0.5 s.
group.min.session.timeout.ms=2000
group.consumer.min.session.timeout.ms=2000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
offsets.topic.num.partitions=1
transaction.state.log.num.partitions=1
# The transaction-timeout test waits for the coordinator to abort a timed-out transaction: check
# every 500 ms instead of every 10 s.
transaction.abort.timed.out.transaction.cleanup.interval.ms=500
# Let compaction tests see the cleaner run within seconds.
log.cleaner.backoff.ms=1000
log.cleaner.min.compaction.lag.ms=0
# Test fixtures use fixed timestamps (2023): with the default 7-day retention the broker would
# delete their segments at its next retention check, in the middle of a test.
log.retention.ms=-1
EOF
}

# ---------------------------------------------------------------------------------------------
# Single node

cluster_running() {
  local n
  for n in 1 2 3; do pid_alive "$CLUSTER/node$n/broker.pid" && return 0; done
  return 1
}

cmd_start() {
  require_jars
  if pid_alive "$SINGLE/broker.pid"; then
    say "broker already running (pid $(cat "$SINGLE/broker.pid"))"
    echo "$SINGLE_BOOTSTRAP"
    return 0
  fi
  local port
  for port in "$PORT_BROKER" "$PORT_CONTROLLER" "$PORT_PROXIED"; do
    port_in_use "$port" && die "port $port is in use by another process"
  done
  local started=$SECONDS
  write_log_configs
  rm -rf "$SINGLE"
  mkdir -p "$SINGLE/logs"
  {
    echo "node.id=1"
    echo "controller.quorum.bootstrap.servers=$HOST:$PORT_CONTROLLER"
    # PROXIED is advertised on 19088, where a test runs its fault-injecting proxy to 19089: a
    # client bootstrapped there is sent back to the proxy by every metadata response.
    echo "listeners=PLAINTEXT://$HOST:$PORT_BROKER,CONTROLLER://$HOST:$PORT_CONTROLLER,PROXIED://$HOST:$PORT_PROXIED"
    echo "advertised.listeners=PLAINTEXT://$HOST:$PORT_BROKER,CONTROLLER://$HOST:$PORT_CONTROLLER,PROXIED://$HOST:$PORT_PROXY"
    echo "log.dirs=$SINGLE/data"
    common_props
    cat <<'EOF'
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
  } >"$SINGLE/server.properties"
  format_storage "$SINGLE" "$(random_cluster_id)" --standalone
  launch "$SINGLE"
  say "started pid $(cat "$SINGLE/broker.pid"); waiting for metadata on $SINGLE_BOOTSTRAP"
  wait_ready "$SINGLE_BOOTSTRAP" "1" "$SINGLE"
  say "ready in $((SECONDS - started)) s (logs: $SINGLE/logs)"
  echo "$SINGLE_BOOTSTRAP"
}

cmd_stop() {
  if [[ -n "$(broker_pids "$SINGLE")" ]]; then
    stop_dirs TERM "$SINGLE"
    say "stopped"
  else
    rm -f "$SINGLE/broker.pid"
    say "not running"
  fi
}

# ---------------------------------------------------------------------------------------------
# Transaction version 1 node: Kafka 4.x formats new clusters with transaction.version=2
# (KIP-890); producers must also work where it is 1 (upgraded clusters, brokers that never
# finalized it), choosing the protocol from the finalized feature. Own ports and directory, so it
# runs beside everything else.

cmd_start_tv1() {
  require_jars
  if pid_alive "$TV1/broker.pid"; then
    say "transaction.version=1 broker already running (pid $(cat "$TV1/broker.pid"))"
    echo "$TV1_BOOTSTRAP"
    return 0
  fi
  local port
  for port in 19492 19493; do
    port_in_use "$port" && die "port $port is in use by another process"
  done
  local started=$SECONDS
  write_log_configs
  rm -rf "$TV1"
  mkdir -p "$TV1/logs"
  {
    echo "node.id=1"
    echo "controller.quorum.bootstrap.servers=$HOST:19493"
    echo "listeners=PLAINTEXT://$HOST:19492,CONTROLLER://$HOST:19493"
    echo "advertised.listeners=PLAINTEXT://$HOST:19492,CONTROLLER://$HOST:19493"
    echo "log.dirs=$TV1/data"
    common_props
    cat <<'EOF2'
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF2
  } >"$TV1/server.properties"
  format_storage "$TV1" "$(random_cluster_id)" --standalone --feature transaction.version=1
  launch "$TV1"
  say "started pid $(cat "$TV1/broker.pid"); waiting for metadata on $TV1_BOOTSTRAP"
  wait_ready "$TV1_BOOTSTRAP" "1" "$TV1"
  say "transaction.version=1 broker ready in $((SECONDS - started)) s (logs: $TV1/logs)"
  echo "$TV1_BOOTSTRAP"
}

cmd_stop_tv1() {
  if [[ -n "$(broker_pids "$TV1")" ]]; then
    stop_dirs TERM "$TV1"
    say "transaction.version=1 broker stopped"
  else
    rm -f "$TV1/broker.pid"
    say "transaction.version=1 broker not running"
  fi
}

# ---------------------------------------------------------------------------------------------
# Three-node cluster

node_dir() {
  [[ "${1:-}" =~ ^[123]$ ]] || die "node must be 1, 2 or 3 (got '${1:-}')"
  echo "$CLUSTER/node$1"
}

cmd_start_cluster() {
  require_jars
  local n running=0
  for n in 1 2 3; do pid_alive "$CLUSTER/node$n/broker.pid" && running=$((running + 1)); done
  if ((running == 3)); then
    say "cluster already running"
    echo "$CLUSTER_BOOTSTRAP"
    return 0
  fi
  ((running == 0)) || die "only $running of 3 cluster nodes run; restart-node the others or stop-cluster"
  local port
  for port in 19192 19193 29192 29193 39192 39193; do
    port_in_use "$port" && die "port $port is in use by another process"
  done
  local started=$SECONDS id dir dirs=()
  id="$(random_cluster_id)"
  write_log_configs
  rm -rf "$CLUSTER"
  for n in 1 2 3; do
    dir="$CLUSTER/node$n"
    dirs+=("$dir")
    mkdir -p "$dir/logs"
    {
      echo "node.id=$n"
      echo "controller.quorum.voters=1@$HOST:19193,2@$HOST:29193,3@$HOST:39193"
      echo "listeners=PLAINTEXT://$HOST:${n}9192,CONTROLLER://$HOST:${n}9193"
      echo "advertised.listeners=PLAINTEXT://$HOST:${n}9192,CONTROLLER://$HOST:${n}9193"
      echo "log.dirs=$dir/data"
      common_props
      cat <<'EOF'
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# Fail over within seconds of a SIGKILL.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=500
EOF
    } >"$dir/server.properties"
  done
  # Formatting is a JVM start each; run them side by side.
  local pids=()
  for dir in "${dirs[@]}"; do format_storage "$dir" "$id" & pids+=($!); done
  for n in "${pids[@]}"; do wait "$n" || die "formatting failed"; done
  for dir in "${dirs[@]}"; do launch "$dir"; done
  say "started 3 nodes; waiting for brokers 1 2 3 in metadata"
  wait_ready "$CLUSTER_BOOTSTRAP" "1 2 3" "${dirs[@]}"
  say "cluster ready in $((SECONDS - started)) s (logs: $CLUSTER/node*/logs)"
  echo "$CLUSTER_BOOTSTRAP"
}

cmd_stop_cluster() {
  if [[ -n "$(broker_pids "$CLUSTER/node1")$(broker_pids "$CLUSTER/node2")$(broker_pids "$CLUSTER/node3")" ]]; then
    stop_dirs TERM "$CLUSTER/node1" "$CLUSTER/node2" "$CLUSTER/node3"
    say "cluster stopped"
  else
    rm -f "$CLUSTER"/node*/broker.pid
    say "cluster not running"
  fi
}

cmd_kill_node() {
  local dir signal="${2:-TERM}"
  dir="$(node_dir "${1:-}")"
  [[ "$signal" == TERM || "$signal" == KILL ]] || die "signal must be TERM or KILL"
  if [[ -z "$(broker_pids "$dir")" ]]; then
    say "node $1 not running"
    return 0
  fi
  local started=$SECONDS
  stop_dirs "$signal" "$dir"
  say "node $1 stopped with SIG$signal in $((SECONDS - started)) s"
}

cmd_restart_node() {
  local dir n="${1:-}"
  dir="$(node_dir "$n")"
  require_jars
  [[ -f "$dir/command" ]] || die "node $n was never started: '$0 start-cluster' first"
  if pid_alive "$dir/broker.pid"; then
    say "node $n already running (pid $(cat "$dir/broker.pid"))"
    return 0
  fi
  port_in_use "${n}9192" && die "port ${n}9192 is in use by another process"
  local started=$SECONDS
  # Same command line, same directories, no reformat.
  write_log_configs
  launch "$dir"
  say "node $n restarted (pid $(cat "$dir/broker.pid")); waiting for it to serve metadata"
  wait_ready "$HOST:${n}9192" "$n" "$dir"
  # --alone: other nodes are down on purpose (an unclean election test); don't wait for them.
  [[ "${2:-}" == --alone ]] || wait_ready "$CLUSTER_BOOTSTRAP" "1 2 3" "$dir"
  say "node $n back in $((SECONDS - started)) s"
}

cmd_status() {
  local n
  if pid_alive "$SINGLE/broker.pid"; then
    echo "single: running (pid $(cat "$SINGLE/broker.pid")) on $SINGLE_BOOTSTRAP"
  else
    echo "single: stopped"
  fi
  for n in 1 2 3; do
    if pid_alive "$CLUSTER/node$n/broker.pid"; then
      echo "cluster node $n: running (pid $(cat "$CLUSTER/node$n/broker.pid")) on $HOST:${n}9192"
    else
      echo "cluster node $n: stopped"
    fi
  done
  if pid_alive "$TV1/broker.pid"; then
    echo "tv1: running (pid $(cat "$TV1/broker.pid")) on $TV1_BOOTSTRAP"
  else
    echo "tv1: stopped"
  fi
  if pid_alive "$SECURE/broker.pid"; then
    echo "secure: running (pid $(cat "$SECURE/broker.pid")): $(grep -v '^CERT_DIR=' "$SECURE/ports.env" 2>/dev/null | tr '\n' ' ')"
  else
    echo "secure: stopped"
  fi
  if pid_alive "$AUTH/broker.pid"; then
    echo "auth: running (pid $(cat "$AUTH/broker.pid")): $(grep -v '^CERT_DIR=' "$AUTH/ports.env" 2>/dev/null | tr '\n' ' ')"
  else
    echo "auth: stopped"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# Secured single node: TLS, mTLS and SASL listeners, apart from the plain broker.
#
# One KRaft combined node with its own ports, so it runs beside `start` (or the cluster's node 1,
# which shares nothing with it either). PEM certificates go inline in server.properties. Users:
# alice/alice-secret for PLAIN (JAAS) and for SCRAM-SHA-256/512 (added at format time).

SECURE_CONTROLLER_PORT=$((19393 + PORT_OFFSET))
# Listener name, port, security protocol. INTERNAL carries inter-broker traffic and readiness.
SECURE_LISTENERS=(
  "INTERNAL $((19391 + PORT_OFFSET)) PLAINTEXT"
  "SASL_PLAINTEXT $((19392 + PORT_OFFSET)) SASL_PLAINTEXT"
  "SSL $((19394 + PORT_OFFSET)) SSL"
  "MTLS $((19395 + PORT_OFFSET)) SSL"
  "SASL_SSL $((19396 + PORT_OFFSET)) SASL_SSL"
  "EXPIRED $((19397 + PORT_OFFSET)) SSL"
  "WRONGNAME $((19398 + PORT_OFFSET)) SSL"
  "SELFSIGNED $((19399 + PORT_OFFSET)) SSL"
  "SASL_SSL_ALL $((19400 + PORT_OFFSET)) SASL_SSL"
)

# pem_value FILE: the PEM in FILE as one properties value (newlines as \n escapes).
pem_value() {
  [[ -s "$1" ]] || die "missing $1 (run gen-certs into the certificate directory first)"
  awk 'NF { printf "%s\\n", $0 }' "$1"
}

# tls_props LISTENER CERT KEY: the listener serves CERT (PEM chain) with KEY (PKCS#8).
tls_props() {
  local prefix="listener.name.$(echo "$1" | tr 'A-Z' 'a-z')"
  echo "$prefix.ssl.keystore.type=PEM"
  echo "$prefix.ssl.keystore.certificate.chain=$(pem_value "$2")"
  echo "$prefix.ssl.keystore.key=$(pem_value "$3")"
}

cmd_start_secure() {
  local certs="${1:-}"
  [[ -n "$certs" ]] || die "usage: $0 start-secure CERT_DIR"
  [[ -d "$certs" ]] || die "no certificate directory $certs"
  certs="$(cd "$certs" && pwd)"
  require_jars
  if pid_alive "$SECURE/broker.pid"; then
    say "secured broker already running (pid $(cat "$SECURE/broker.pid"))"
    cat "$SECURE/ports.env"
    return 0
  fi
  local entry name port protocol ports=("$SECURE_CONTROLLER_PORT")
  for entry in "${SECURE_LISTENERS[@]}"; do
    read -r name port protocol <<<"$entry"
    ports+=("$port")
  done
  for port in "${ports[@]}"; do
    port_in_use "$port" && die "port $port is in use by another process"
  done
  local started=$SECONDS listeners="" map="CONTROLLER:PLAINTEXT"
  for entry in "${SECURE_LISTENERS[@]}"; do
    read -r name port protocol <<<"$entry"
    listeners+="$name://$HOST:$port,"
    map+=",$name:$protocol"
  done
  listeners="${listeners%,}"
  write_log_configs
  # Fresh state each start, but keep whatever else is in the directory (the certificates).
  rm -rf "$SECURE/data" "$SECURE/logs" "$SECURE/command" "$SECURE/ports.env" "$SECURE/server.properties"
  mkdir -p "$SECURE/logs"
  local jaas_scram='org.apache.kafka.common.security.scram.ScramLoginModule required;'
  {
    echo "process.roles=broker,controller"
    echo "node.id=1"
    echo "controller.quorum.bootstrap.servers=$HOST:$SECURE_CONTROLLER_PORT"
    echo "listeners=$listeners,CONTROLLER://$HOST:$SECURE_CONTROLLER_PORT"
    echo "advertised.listeners=$listeners,CONTROLLER://$HOST:$SECURE_CONTROLLER_PORT"
    echo "listener.security.protocol.map=$map"
    echo "inter.broker.listener.name=INTERNAL"
    echo "controller.listener.names=CONTROLLER"
    echo "log.dirs=$SECURE/data"
    cat <<'EOF'
num.network.threads=2
num.io.threads=2
auto.create.topics.enable=false
log.retention.ms=-1
group.initial.rebalance.delay.ms=0
offsets.topic.num.partitions=1
transaction.state.log.num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl_all.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl_all.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
listener.name.sasl_ssl_all.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
listener.name.mtls.ssl.client.auth=required
listener.name.mtls.ssl.truststore.type=PEM
EOF
    echo "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=$jaas_scram"
    echo "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$jaas_scram"
    echo "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$jaas_scram"
    echo "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$jaas_scram"
    echo "listener.name.sasl_ssl_all.scram-sha-256.sasl.jaas.config=$jaas_scram"
    echo "listener.name.sasl_ssl_all.scram-sha-512.sasl.jaas.config=$jaas_scram"
    echo "listener.name.mtls.ssl.truststore.certificates=$(pem_value "$certs/ca.pem")"
    tls_props SSL "$certs/broker.pem" "$certs/broker.key"
    tls_props MTLS "$certs/broker.pem" "$certs/broker.key"
    tls_props SASL_SSL "$certs/broker.pem" "$certs/broker.key"
    tls_props SASL_SSL_ALL "$certs/broker.pem" "$certs/broker.key"
    tls_props EXPIRED "$certs/broker-expired.pem" "$certs/broker-expired.key"
    tls_props WRONGNAME "$certs/broker-wrongname.pem" "$certs/broker-wrongname.key"
    tls_props SELFSIGNED "$certs/broker-selfsigned-ca.pem" "$certs/broker-selfsigned-ca.key"
  } >"$SECURE/server.properties"
  format_storage "$SECURE" "$(random_cluster_id)" --standalone \
    --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \
    --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'
  launch "$SECURE"
  local internal="$HOST:${SECURE_LISTENERS[0]#INTERNAL }"
  internal="${internal% PLAINTEXT}"
  say "started secured broker pid $(cat "$SECURE/broker.pid"); waiting for metadata on $internal"
  wait_ready "$internal" "1" "$SECURE"
  {
    for entry in "${SECURE_LISTENERS[@]}"; do
      read -r name port protocol <<<"$entry"
      echo "$name=$HOST:$port"
    done
    echo "CERT_DIR=$certs"
  } >"$SECURE/ports.env.tmp"
  mv "$SECURE/ports.env.tmp" "$SECURE/ports.env"
  say "secured broker ready in $((SECONDS - started)) s (logs: $SECURE/logs)"
  cat "$SECURE/ports.env"
}

cmd_stop_secure() {
  if [[ -n "$(broker_pids "$SECURE")" ]]; then
    stop_dirs TERM "$SECURE"
    say "secured broker stopped"
  else
    rm -f "$SECURE/broker.pid"
    say "secured broker not running"
  fi
  rm -f "$SECURE/ports.env"
}

# ---------------------------------------------------------------------------------------------
# Re-authentication and OIDC node (issue #19): one KRaft combined node on its own ports, beside
# the others. Every SASL listener has connections.max.reauth.ms (5000 by default), so sessions
# last 5 s and a client that does not re-authenticate (KIP-368) has its connection closed by the
# broker. The OAUTHBEARER listener validates signed JWTs with Kafka's
# OAuthBearerValidatorCallbackHandler against the JWKS of the FAKE identity provider
# tests/oauth/fake_idp.py (started first: the broker fetches the JWKS at startup; the IdP
# generates its RSA key at each start). Kafka 4.x refuses to fetch a URL that is not listed in
# -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls.
# Users: alice/alice-secret (PLAIN, and SCRAM-SHA-256/512 added at format time); tests add their
# own SCRAM users with kafka-configs (ConfigCommand) when they change passwords.

AUTH_CONTROLLER_PORT=19593
AUTH_JWKS_PORT=19596
AUTH_TOKEN_PORT=19597
AUTH_REAUTH_MS="${SLUICE_AUTH_REAUTH_MS:-5000}"
AUTH_LISTENERS=(
  "INTERNAL 19591 PLAINTEXT"
  "SCRAM 19592 SASL_PLAINTEXT"
  "PLAIN 19594 SASL_PLAINTEXT"
  "OAUTH 19595 SASL_PLAINTEXT"
)

idp_alive() {
  local pid
  [[ -f "$AUTH/idp.pid" ]] || return 1
  pid="$(cat "$AUTH/idp.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'fake_idp\.py'
}

stop_idp() {
  if idp_alive; then
    kill -TERM "$(cat "$AUTH/idp.pid")" 2>/dev/null || true
    sleep 0.3
  fi
  rm -f "$AUTH/idp.pid"
}

cmd_start_auth() {
  local certs="${1:-}"
  [[ -n "$certs" ]] || die "usage: $0 start-auth CERT_DIR"
  [[ -d "$certs" ]] || die "no certificate directory $certs"
  certs="$(cd "$certs" && pwd)"
  require_jars
  if pid_alive "$AUTH/broker.pid" && idp_alive; then
    say "auth broker already running (pid $(cat "$AUTH/broker.pid"))"
    cat "$AUTH/ports.env"
    return 0
  fi
  cmd_stop_auth >/dev/null 2>&1 || true
  command -v python3 >/dev/null || die "python3 not found (the fake identity provider needs it)"
  if ! python3 -c 'import cryptography' 2>/dev/null; then
    say "installing the Python package cryptography for the fake identity provider"
    python3 -m pip install -q cryptography >&2 || die "pip install cryptography failed"
  fi
  local entry name port protocol ports=("$AUTH_CONTROLLER_PORT" "$AUTH_JWKS_PORT" "$AUTH_TOKEN_PORT")
  for entry in "${AUTH_LISTENERS[@]}"; do
    read -r name port protocol <<<"$entry"
    ports+=("$port")
  done
  for port in "${ports[@]}"; do
    port_in_use "$port" && die "port $port is in use by another process"
  done
  local started=$SECONDS listeners="" map="CONTROLLER:PLAINTEXT"
  for entry in "${AUTH_LISTENERS[@]}"; do
    read -r name port protocol <<<"$entry"
    listeners+="$name://$HOST:$port,"
    map+=",$name:$protocol"
  done
  listeners="${listeners%,}"
  write_log_configs
  rm -rf "$AUTH"
  mkdir -p "$AUTH/logs"
  # The interpreter itself, not a version manager's shim (pyenv's is a chain of execs): while a
  # process execs, /proc/PID/cmdline can read empty, and idp_alive took that for an exit.
  local python
  python="$(python3 -c 'import sys; print(sys.executable)')"
  "$python" "$ROOT/tests/oauth/fake_idp.py" "$HOST" "$AUTH_JWKS_PORT" "$AUTH_TOKEN_PORT" \
    "$certs/broker.pem" "$certs/broker.key" </dev/null >>"$AUTH/idp.log" 2>&1 &
  local idp_pid=$!
  echo "$idp_pid" >"$AUTH/idp.pid"
  local deadline=$((SECONDS + 20))
  until port_in_use "$AUTH_JWKS_PORT" && port_in_use "$AUTH_TOKEN_PORT"; do
    # Our own child: kill -0 tells whether it still runs, whatever its command line reads.
    kill -0 "$idp_pid" 2>/dev/null || { cat "$AUTH/idp.log" >&2; die "the fake identity provider exited"; }
    ((SECONDS < deadline)) || { cat "$AUTH/idp.log" >&2; die "the fake identity provider did not listen within 20 s"; }
    sleep 0.2
  done
  local jwks="http://$HOST:$AUTH_JWKS_PORT/jwks"
  local jaas_scram='org.apache.kafka.common.security.scram.ScramLoginModule required;'
  {
    echo "process.roles=broker,controller"
    echo "node.id=1"
    echo "controller.quorum.bootstrap.servers=$HOST:$AUTH_CONTROLLER_PORT"
    echo "listeners=$listeners,CONTROLLER://$HOST:$AUTH_CONTROLLER_PORT"
    echo "advertised.listeners=$listeners,CONTROLLER://$HOST:$AUTH_CONTROLLER_PORT"
    echo "listener.security.protocol.map=$map"
    echo "inter.broker.listener.name=INTERNAL"
    echo "controller.listener.names=CONTROLLER"
    echo "log.dirs=$AUTH/data"
    echo "connections.max.reauth.ms=$AUTH_REAUTH_MS"
    cat <<'EOF'
num.network.threads=2
num.io.threads=2
auto.create.topics.enable=false
log.retention.ms=-1
group.initial.rebalance.delay.ms=0
offsets.topic.num.partitions=1
transaction.state.log.num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.plain.sasl.enabled.mechanisms=PLAIN
listener.name.plain.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.expected.audience=sluice-kafka
# ACLs: the producer's authorization tests DENY one user on their own topics and transactional
# ids. Everything without an ACL stays allowed; ANONYMOUS (the PLAINTEXT listeners: controller,
# inter-broker, the admin tools) is a super user.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS
EOF
    echo "listener.name.scram.scram-sha-256.sasl.jaas.config=$jaas_scram"
    echo "listener.name.scram.scram-sha-512.sasl.jaas.config=$jaas_scram"
    echo "sasl.oauthbearer.jwks.endpoint.url=$jwks"
    echo "sasl.oauthbearer.expected.issuer=https://$HOST:$AUTH_TOKEN_PORT"
  } >"$AUTH/server.properties"
  format_storage "$AUTH" "$(random_cluster_id)" --standalone \
    --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \
    --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'
  EXTRA_JVM_OPTS=("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$jwks")
  launch "$AUTH"
  EXTRA_JVM_OPTS=()
  local internal="$HOST:19591"
  say "started auth broker pid $(cat "$AUTH/broker.pid"); waiting for metadata on $internal"
  wait_ready "$internal" "1" "$AUTH"
  {
    for entry in "${AUTH_LISTENERS[@]}"; do
      read -r name port protocol <<<"$entry"
      echo "$name=$HOST:$port"
    done
    echo "JWKS_URL=$jwks"
    echo "TOKEN_URL=https://$HOST:$AUTH_TOKEN_PORT/token"
    echo "REAUTH_MS=$AUTH_REAUTH_MS"
    echo "CERT_DIR=$certs"
  } >"$AUTH/ports.env.tmp"
  mv "$AUTH/ports.env.tmp" "$AUTH/ports.env"
  say "auth broker ready in $((SECONDS - started)) s (logs: $AUTH/logs, $AUTH/idp.log)"
  cat "$AUTH/ports.env"
}

cmd_stop_auth() {
  if [[ -n "$(broker_pids "$AUTH")" ]]; then
    stop_dirs TERM "$AUTH"
    say "auth broker stopped"
  else
    rm -f "$AUTH/broker.pid"
    say "auth broker not running"
  fi
  stop_idp
  rm -f "$AUTH/ports.env"
}

# ---------------------------------------------------------------------------------------------
# Java helpers

compile_java() {
  local stamp="$CLASSES/.stamp" sources
  sources=("$JAVA_SRC"/*.java)
  [[ -e "${sources[0]}" ]] || return 0
  if [[ -f "$stamp" ]] && [[ -z "$(find "$JAVA_SRC" -name '*.java' -newer "$stamp" | head -n1)" ]] \
     && [[ "$TOOLS_LIB/.fetched" -ot "$stamp" ]]; then
    return 0
  fi
  say "compiling tests/java"
  rm -rf "$CLASSES"
  mkdir -p "$CLASSES"
  javac -nowarn -encoding UTF-8 -d "$CLASSES" -cp "$TOOLS_LIB/*" "${sources[@]}" >&2
  touch "$stamp"
}

cmd_java() {
  [[ $# -ge 1 ]] || die "usage: $0 java MAIN_CLASS [ARGS...]"
  [[ -z "$VERSION" ]] || LIB="$TOOLS_LIB"   # the Java tools keep the default version's jars
  require_jars
  write_log_configs
  compile_java
  exec java -Xmx512m -Dlog4j2.configurationFile="$HOME_DIR/log4j2-tools.properties" \
    -cp "$CLASSES:$TOOLS_LIB/*" "$@"
}

usage() {
  sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
if [[ -n "$VERSION" ]]; then
  case "$cmd" in
    start-cluster|stop-cluster|kill-node|restart-node) die "SLUICE_BROKER_VERSION runs single and secured nodes only" ;;
  esac
fi
case "$cmd" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  start-cluster) cmd_start_cluster ;;
  stop-cluster) cmd_stop_cluster ;;
  kill-node) cmd_kill_node "$@" ;;
  restart-node) cmd_restart_node "$@" ;;
  java) cmd_java "$@" ;;
  start-secure) cmd_start_secure "$@" ;;
  stop-secure) cmd_stop_secure ;;
  start-tv1) cmd_start_tv1 ;;
  stop-tv1) cmd_stop_tv1 ;;
  start-auth) cmd_start_auth "$@" ;;
  stop-auth) cmd_stop_auth ;;
  status) cmd_status ;;
  *) usage ;;
esac
