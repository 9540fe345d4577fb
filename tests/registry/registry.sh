#!/usr/bin/env bash
# The schema registry Sluice's tests talk to: a FAKE, franz-go's pkg/sr/srfake (the Confluent
# registry's REST API in memory; tests/registry/srfake/main.go), built with the machine's Go from
# the Go module proxy. No real registry starts here: Karapace is not on PyPI any more, Confluent's
# needs its own distribution, Apicurio a Quarkus build. The registry's clients in the tests
# (Python confluent-kafka's AvroSerializer, Sluice) are real; only the server is a fake.
#
#   registry.sh start    build (once) and start on ${SLUICE_REGISTRY_HOST:-127.0.0.1}:${SLUICE_REGISTRY_PORT:-18081};
#                        prints the URL
#   registry.sh stop     stop it (idempotent)
#   registry.sh url      the URL
#
# Files: <repo>/target/registry/ (the binary, srfake-<port>.pid, srfake-<port>.log).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HOST="${SLUICE_REGISTRY_HOST:-127.0.0.1}"
PORT="${SLUICE_REGISTRY_PORT:-18081}"
DIR="$ROOT/target/registry"
BIN="$DIR/srfake"
PID_FILE="$DIR/srfake-$HOST-$PORT.pid"
LOG="$DIR/srfake-$HOST-$PORT.log"

die() { echo "registry.sh: error: $*" >&2; exit 1; }
listening() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    if [[ ! -x "$BIN" || "$ROOT/tests/registry/srfake/main.go" -nt "$BIN" ]]; then
      command -v go >/dev/null || die "go is not installed (needed to build the fake registry)"
      echo "registry.sh: building srfake" >&2
      (cd "$ROOT/tests/registry/srfake" && go build -o "$BIN" .) || die "building srfake failed"
    fi
    if [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
      echo "http://$HOST:$PORT"; exit 0
    fi
    listening && die "port $PORT on $HOST is in use by another process"
    nohup "$BIN" -addr "$HOST:$PORT" >"$LOG" 2>&1 &
    echo $! >"$PID_FILE"
    for _ in $(seq 1 100); do
      listening && { echo "http://$HOST:$PORT"; exit 0; }
      kill -0 "$(cat "$PID_FILE")" 2>/dev/null || die "srfake exited: $(tail -3 "$LOG")"
      sleep 0.1
    done
    die "srfake did not listen on $HOST:$PORT within 10 s (see $LOG)"
    ;;
  stop)
    if [[ -f "$PID_FILE" ]]; then
      kill "$(cat "$PID_FILE")" 2>/dev/null || true
      rm -f "$PID_FILE"
    fi
    ;;
  url) echo "http://$HOST:$PORT" ;;
  *) die "usage: registry.sh start|stop|url" ;;
esac
