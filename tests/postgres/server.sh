#!/usr/bin/env bash
# A real PostgreSQL server for Sluice's tests, from Debian's packages (postgresql-NN), run as a
# non-root user in a temporary data directory. Not a fake: the same server binaries as production.
#
#   server.sh start [CERT_DIR]  initdb a fresh data directory and start the server on
#                               127.0.0.1:${SLUICE_PG_PORT:-15432}; prints the connection URL
#                               postgres://sluice:<password>@127.0.0.1:<port>/postgres. Installs
#                               Debian's `postgresql` package first when no initdb is found (root).
#                               With CERT_DIR (what gen-certs writes) SSL is on: CERT_DIR/broker.pem
#                               and broker.key (signed by CERT_DIR/ca.pem; SANs 127.0.0.1, localhost)
#   server.sh stop              pg_ctl stop -m fast (bounded), then SIGKILL what is left; idempotent
#   server.sh restart           pg_ctl stop -m immediate (a crash: no shutdown checkpoint) and start
#                               again on the same data directory (no initdb: crash recovery runs);
#                               prints the URL
#   server.sh status            running or stopped, where its files are, the URL
#   server.sh psql [ARGS...]    psql as the superuser `sluice` (database postgres unless ARGS name one)
#
# The superuser is `sluice`, password ${SLUICE_PG_PASSWORD:-sluice-test-password}: scram-sha-256
# over TCP, trust on the unix socket. fsync stays on (tests check durability); timezone is UTC.
# SLUICE_PG_START_TIMEOUT (default 60 s) bounds the wait for readiness, SLUICE_PG_STOP_TIMEOUT
# (default 30 s) a stop before SIGKILL.
#
# PostgreSQL refuses to run as root: as root the server runs as the system user `sluice-pg`
# (created when missing), otherwise as the current user. Everything lives in <repo>/.postgres/
# (git-ignored): server.env (where the server's files are, port, password, URL) and, when the
# server's user can reach and own it, the server's files themselves: data/ (fresh each start),
# socket/ (unix_socket_directories), server.log. When it cannot (a clone under /root, mode 0700)
# or the socket path would be too long for a unix socket, those files go to a fresh
# `mktemp -d /tmp/sluice-pg.XXXXXX` directory instead, named in server.env (RUN_DIR=...).
# stdout carries only results (the URL, psql's output); progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PG_HOME="$ROOT/.postgres"
ENV_FILE="$PG_HOME/server.env"
HOST=127.0.0.1
SUPERUSER=sluice
SERVICE_USER=sluice-pg
START_TIMEOUT="${SLUICE_PG_START_TIMEOUT:-60}"
STOP_TIMEOUT="${SLUICE_PG_STOP_TIMEOUT:-30}"

say() { echo "server.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

is_root() { [[ "$(id -u)" -eq 0 ]]; }

# The user the server runs as.
server_user() {
  if is_root; then echo "$SERVICE_USER"; else id -un; fi
}

# as_server CMD...: run CMD as the server's user, from / (its cwd may be unreachable for it).
as_server() {
  if is_root; then
    (cd / && runuser -u "$SERVICE_USER" -- "$@")
  else
    "$@"
  fi
}

# ---------------------------------------------------------------------------------------------
# Installation and the service user

# The newest /usr/lib/postgresql/<version>/bin with an initdb, or nothing.
newest_bin() {
  local initdb
  initdb="$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n1)"
  [[ -x "$initdb" ]] && dirname "$initdb"
  return 0
}

ensure_installed() {
  [[ -n "$(newest_bin)" ]] && return 0
  # The shared set-up step says what it installs, and refuses without root.
  "$ROOT/scripts/setup.sh" postgres
  [[ -n "$(newest_bin)" ]] || die "scripts/setup.sh postgres left no /usr/lib/postgresql/*/bin/initdb"
}

ensure_service_user() {
  is_root || return 0
  id -u "$SERVICE_USER" >/dev/null 2>&1 && return 0
  say "creating the system user $SERVICE_USER (PostgreSQL refuses to run as root)"
  useradd --system --no-create-home --user-group --home-dir /nonexistent --shell /usr/sbin/nologin \
    "$SERVICE_USER" >&2
}

# ---------------------------------------------------------------------------------------------
# State: .postgres/server.env

# load_env: read server.env into RUN_DIR, PORT, PASSWORD, BIN, CERT_DIR, URL; false when absent.
load_env() {
  [[ -f "$ENV_FILE" ]] || return 1
  # shellcheck source=/dev/null
  source "$ENV_FILE"
  DATA="$RUN_DIR/data"
  SOCKET_DIR="$RUN_DIR/socket"
  LOG="$RUN_DIR/server.log"
}

write_env() {
  local tmp="$ENV_FILE.tmp"
  (
    umask 077
    {
      echo "# Written by tests/postgres/server.sh start; read by its other commands."
      printf 'RUN_DIR=%q\n' "$RUN_DIR"
      printf 'PORT=%q\n' "$PORT"
      printf 'PASSWORD=%q\n' "$PASSWORD"
      printf 'BIN=%q\n' "$BIN"
      printf 'CERT_DIR=%q\n' "$CERT_DIR"
      printf 'URL=%q\n' "$URL"
    } >"$tmp"
  )
  mv "$tmp" "$ENV_FILE"
}

# urlencode STRING: STRING percent-encoded for a URL's userinfo.
urlencode() {
  local LC_ALL=C s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [A-Za-z0-9._~-]) out+="$c" ;;
      *) out+="$(printf '%%%02X' "'$c")" ;;
    esac
  done
  echo "$out"
}

# ---------------------------------------------------------------------------------------------
# Processes

port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# postmaster_pids DATA: the postmasters serving DATA: the one in its postmaster.pid, and any
# whose pid file was lost (found by their command line, `postgres -D DATA`).
postmaster_pids() {
  local data="$1" pid file cmdline
  {
    if [[ -f "$data/postmaster.pid" ]]; then
      pid="$(head -n1 "$data/postmaster.pid" 2>/dev/null || true)"
      if [[ "$pid" =~ ^[0-9]+$ ]] && cmdline="$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" \
          && [[ "$cmdline" == *postgres* ]]; then
        echo "$pid"
      fi
    fi
    for file in $(grep -slF -- "$data" /proc/[0-9]*/cmdline 2>/dev/null || true); do
      cmdline="$(tr '\0' ' ' 2>/dev/null <"$file")" || continue
      [[ "$cmdline" == *"/postgres -D $data "* || "$cmdline" == *"/postgres -D $data" ]] || continue
      file="${file#/proc/}"
      echo "${file%/cmdline}"
    done
  } | sort -un
}

# child_pids PID: the processes whose parent is PID (a postmaster's backends and workers).
child_pids() {
  local parent="$1" file stat ppid
  for file in /proc/[0-9]*/stat; do
    { read -r stat <"$file"; } 2>/dev/null || continue
    stat="${stat##*) }"   # past "pid (comm) "; comm may hold spaces
    read -r _ ppid _ <<<"$stat"
    if [[ "$ppid" == "$parent" ]]; then
      file="${file#/proc/}"
      echo "${file%/stat}"
    fi
  done
  return 0
}

server_running() { [[ -n "${DATA:-}" && -n "$(postmaster_pids "$DATA")" ]]; }

# kill_leftovers: SIGKILL every process of the server in DATA (postmasters and their children)
# and wait (bounded) until they are gone.
kill_leftovers() {
  local pid child pids=() deadline
  for pid in $(postmaster_pids "$DATA"); do
    pids+=("$pid")
    for child in $(child_pids "$pid"); do pids+=("$child"); done
  done
  ((${#pids[@]} > 0)) || return 0
  say "killing leftover server processes: ${pids[*]}"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  done
  return 0
}

show_log() {
  say "---- tail of $LOG"
  tail -n 40 "$LOG" >&2 2>/dev/null || true
}

# client ARGS...: the chosen psql, connected over TCP as the superuser (password auth).
client() {
  PGPASSWORD="$PASSWORD" PGCONNECT_TIMEOUT=3 "$BIN/psql" -X -h "$HOST" -p "$PORT" -U "$SUPERUSER" "$@"
}

# launch: pg_ctl start on DATA, then wait until a password login over TCP runs `select 1`.
launch() {
  local deadline=$((SECONDS + START_TIMEOUT))
  # pg_ctl runs the postmaster with stdin /dev/null and stdout/stderr appended to LOG, so it
  # keeps none of our file descriptors (a caller capturing our output is not held open).
  if ! as_server "$BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t "$START_TIMEOUT" -s >&2; then
    say "pg_ctl start failed"
    show_log
    exit 1
  fi
  until [[ "$(client -d postgres -Atqc 'select 1' 2>/dev/null)" == 1 ]]; do
    if ((SECONDS >= deadline)); then
      say "no password login on $HOST:$PORT after $START_TIMEOUT s"
      client -d postgres -Atqc 'select 1' >&2 || true
      show_log
      exit 1
    fi
    server_running || { say "the server exited during startup"; show_log; exit 1; }
    sleep 0.5
  done
}

# check_ssl: a verify-full connection with the test CA succeeds and is encrypted.
check_ssl() {
  local ssl
  ssl="$(PGSSLMODE=verify-full PGSSLROOTCERT="$CERT_DIR/ca.pem" \
    client -d postgres -Atqc 'select ssl from pg_stat_ssl where pid = pg_backend_pid()' 2>&1)" \
    || { say "a verify-full TLS connection failed: $ssl"; show_log; exit 1; }
  [[ "$ssl" == t ]] || die "a verify-full connection is not encrypted (pg_stat_ssl.ssl = '$ssl')"
}

# ---------------------------------------------------------------------------------------------
# Commands

cmd_start() {
  local certs="${1:-}" user started=$SECONDS file
  if [[ -n "$certs" ]]; then
    [[ -d "$certs" ]] || die "no certificate directory $certs"
    certs="$(cd "$certs" && pwd)"
    for file in broker.pem broker.key ca.pem; do
      [[ -s "$certs/$file" ]] || die "missing $certs/$file (run gen-certs into $certs first)"
    done
  fi
  if load_env && server_running; then
    say "already running (pid $(postmaster_pids "$DATA" | head -n1), files in $RUN_DIR); 'stop' first for a fresh one"
    echo "$URL"
    return 0
  fi
  # A server from an earlier start that lost its pid file, or half-stopped: clear it away.
  [[ -n "${DATA:-}" ]] && kill_leftovers

  PORT="${SLUICE_PG_PORT:-15432}"
  PASSWORD="${SLUICE_PG_PASSWORD:-sluice-test-password}"
  [[ "$PORT" =~ ^[0-9]+$ ]] || die "SLUICE_PG_PORT must be a port number (got '$PORT')"
  port_in_use "$PORT" && die "port $PORT is in use by another process"
  ensure_installed
  BIN="$(newest_bin)"
  ensure_service_user
  user="$(server_user)"

  # Fresh state: the previous start's files go, wherever they were.
  if [[ -n "${RUN_DIR:-}" && "$RUN_DIR" == /tmp/sluice-pg.* && -d "$RUN_DIR" ]]; then
    rm -rf "$RUN_DIR"
  fi
  rm -rf "$PG_HOME/data" "$PG_HOME/socket" "$PG_HOME/server.log" "$PG_HOME/initdb.log" "$ENV_FILE"
  mkdir -p "$PG_HOME"
  is_root && chown "$user:" "$PG_HOME"

  # The server's files go in .postgres/ when its user can reach and write it there and the socket
  # path fits in sun_path (108 bytes); otherwise in a private directory under /tmp.
  RUN_DIR="$PG_HOME"
  if ! as_server test -w "$PG_HOME" -a -x "$PG_HOME" 2>/dev/null; then
    RUN_DIR="$(mktemp -d /tmp/sluice-pg.XXXXXX)"
    say "$user cannot write $PG_HOME (a parent directory is closed to it): server files in $RUN_DIR"
  elif ((${#PG_HOME} + ${#PORT} + 20 > 100)); then
    RUN_DIR="$(mktemp -d /tmp/sluice-pg.XXXXXX)"
    say "the socket path under $PG_HOME would be too long: server files in $RUN_DIR"
  fi
  is_root && chown "$user:" "$RUN_DIR"
  DATA="$RUN_DIR/data"
  SOCKET_DIR="$RUN_DIR/socket"
  LOG="$RUN_DIR/server.log"
  CERT_DIR="$certs"
  URL="postgres://$SUPERUSER:$(urlencode "$PASSWORD")@$HOST:$PORT/postgres"
  as_server mkdir -m 0700 "$SOCKET_DIR"
  write_env

  say "initdb with $BIN (PostgreSQL $("$BIN/postgres" --version | sed -n 's/^postgres (PostgreSQL) \([^ ]*\).*/\1/p')) as $user in $DATA"
  local pwfile="$RUN_DIR/pwfile"
  (umask 077 && printf '%s\n' "$PASSWORD" >"$pwfile")
  is_root && chown "$user:" "$pwfile"
  if ! as_server "$BIN/initdb" -D "$DATA" -U "$SUPERUSER" --pwfile="$pwfile" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-instructions \
      >"$RUN_DIR/initdb.log" 2>&1; then
    rm -f "$pwfile"
    cat "$RUN_DIR/initdb.log" >&2
    die "initdb failed (log: $RUN_DIR/initdb.log)"
  fi
  rm -f "$pwfile"

  # Appended to the file initdb wrote: the last setting of a name wins.
  {
    echo
    echo "# ---- tests/postgres/server.sh"
    echo "listen_addresses = '$HOST'"
    echo "port = $PORT"
    echo "unix_socket_directories = '$SOCKET_DIR'"
    echo "max_connections = 200"
    echo "password_encryption = 'scram-sha-256'"
    echo "# Durability is under test: nothing is relaxed."
    echo "fsync = on"
    echo "synchronous_commit = on"
    echo "full_page_writes = on"
    echo "# pg_ctl -l sends the server's stderr to $LOG."
    echo "logging_collector = off"
    echo "log_destination = 'stderr'"
    echo "timezone = 'UTC'"
    echo "log_timezone = 'UTC'"
  } >>"$DATA/postgresql.conf"
  if [[ -n "$CERT_DIR" ]]; then
    # The key must belong to the server's user with mode 0600: copies in the data directory.
    local owner=()
    is_root && owner=(-o "$user" -g "$(id -gn "$user")")
    install -m 0644 "${owner[@]}" "$CERT_DIR/broker.pem" "$DATA/server.crt"
    install -m 0600 "${owner[@]}" "$CERT_DIR/broker.key" "$DATA/server.key"
    install -m 0644 "${owner[@]}" "$CERT_DIR/ca.pem" "$DATA/root.crt"
    {
      echo "# Certificates from $CERT_DIR (gen-certs): the CA-signed broker certificate."
      echo "ssl = on"
      echo "ssl_cert_file = 'server.crt'"
      echo "ssl_key_file = 'server.key'"
      echo "ssl_ca_file = 'root.crt'"
    } >>"$DATA/postgresql.conf"
  fi

  say "starting on $HOST:$PORT (ssl $([[ -n "$CERT_DIR" ]] && echo on || echo off)), log $LOG"
  launch
  [[ -n "$CERT_DIR" ]] && check_ssl
  say "ready in $((SECONDS - started)) s"
  echo "$URL"
}

cmd_stop() {
  if ! load_env || ! server_running; then
    [[ -n "${DATA:-}" ]] && kill_leftovers
    say "not running"
    return 0
  fi
  if ! as_server "$BIN/pg_ctl" stop -D "$DATA" -m fast -t "$STOP_TIMEOUT" -s >&2; then
    say "pg_ctl stop did not finish within $STOP_TIMEOUT s"
  fi
  kill_leftovers
  say "stopped"
}

cmd_restart() {
  load_env || die "never started: '$0 start' first"
  [[ -f "$DATA/PG_VERSION" ]] || die "no data directory $DATA: '$0 start' first"
  local started=$SECONDS
  if server_running; then
    # Immediate: backends are killed without a shutdown checkpoint, like a crash; the next start
    # replays the WAL.
    as_server "$BIN/pg_ctl" stop -D "$DATA" -m immediate -t "$STOP_TIMEOUT" -s >&2 \
      || say "pg_ctl stop -m immediate did not finish within $STOP_TIMEOUT s"
  fi
  kill_leftovers
  port_in_use "$PORT" && die "port $PORT is in use by another process"
  say "starting again on the same data directory $DATA"
  launch
  [[ -n "$CERT_DIR" ]] && check_ssl
  say "back in $((SECONDS - started)) s"
  echo "$URL"
}

cmd_status() {
  if load_env && server_running; then
    echo "running (pid $(postmaster_pids "$DATA" | head -n1)) on $HOST:$PORT as $(stat -c %U "$DATA"), ssl $([[ -n "$CERT_DIR" ]] && echo on || echo off)"
    echo "files: $RUN_DIR (log $LOG)"
    echo "$URL"
  else
    echo "stopped"
  fi
  return 0
}

cmd_psql() {
  load_env || die "never started: '$0 start' first"
  PGPASSWORD="$PASSWORD" PGHOST="$HOST" PGPORT="$PORT" PGUSER="$SUPERUSER" PGDATABASE=postgres \
    exec "$BIN/psql" "$@"
}

usage() {
  sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  restart) cmd_restart ;;
  status) cmd_status ;;
  psql) cmd_psql "$@" ;;
  *) usage ;;
esac
