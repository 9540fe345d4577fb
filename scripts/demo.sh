#!/usr/bin/env bash
# The main job on a fresh machine: start a local Kafka 4.1 broker (jars from Maven Central), write
# a demo topic, and read it back through Sluice's own pure-Rust client.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tests/kafka/broker.sh fetch
tests/kafka/broker.sh start
cargo run --release -q -p sluice-wire --example demo -- 127.0.0.1:19092
echo "The broker keeps running; stop it with: tests/kafka/broker.sh stop"
