#!/usr/bin/env bash
# The main job on a fresh machine: start a local Kafka 4.1 broker (jars from Maven Central), write
# a `demo` topic through Sluice's own pure-Rust client, then run a bounded read of it into the
# embedded destination (./demo-output).
#
# On a fresh machine it first installs what the broker needs (Java 17 and Maven, from Debian's
# packages: scripts/setup.sh says what before installing); Rust (stable, 1.89+) must be there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/setup.sh rust java
tests/kafka/broker.sh fetch
tests/kafka/broker.sh start
cargo build --release -q -p sluice --bin sluice
cargo build --release -q -p sluice-wire --example demo
target/release/examples/demo 127.0.0.1:19092
config="$root/target/demo-config.json"
echo '{"brokers": ["127.0.0.1:19092"], "topics": ["demo"]}' > "$config"
target/release/sluice check --config "$config"
target/release/sluice read --config "$config" --dest "$root/demo-output" --mode bounded --write-policy replace
echo "Rows are in demo-output/demo/segments/*.jsonl; checkpoints in demo-output/_sluice/checkpoints.json."
echo "The broker keeps running; stop it with: tests/kafka/broker.sh stop"
