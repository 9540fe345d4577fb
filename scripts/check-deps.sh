#!/usr/bin/env bash
# The dependency gate: fails when the product's dependency graph (normal and build dependencies of
# sluice-wire and sluice) gains a crate that links librdkafka or OpenSSL, any `-sys` crate, or, for
# the C-free feature set, any crate that compiles C (cc, cmake, ring, aws-lc). Its message names
# the crate and the path that brought it in. Test and benchmark crates are not part of this graph.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="x86_64-unknown-linux-gnu"
failed=0

# check LABEL FORBIDDEN_REGEX CARGO_TREE_ARGS...
check() {
  local label="$1" forbidden="$2"
  shift 2
  local crates
  crates=$(cargo tree --locked -e normal,build --target "$target" --prefix none -f '{p}' "$@" \
    | sed 's/ (\*)$//; s/ (proc-macro)$//' | awk '{print $1}' | sort -u)
  local bad
  bad=$(grep -E "$forbidden" <<<"$crates" || true)
  if [[ -z "$bad" ]]; then
    echo "check-deps: $label: ok ($(wc -l <<<"$crates") crates)"
    return
  fi
  for crate in $bad; do
    echo "check-deps: $label: forbidden crate $crate, brought in by:" >&2
    cargo tree --locked -e normal,build --target "$target" -i "$crate" "$@" 2>&1 | sed 's/^/    /' >&2
  done
  failed=1
}

always='^(rdkafka|rdkafka-sys|librdkafka.*|openssl|openssl-sys|openssl-src|native-tls)$|-sys$'
c_free="$always|^(cc|cmake|ring|aws-lc-rs|aws-lc-sys|aws-lc-fips-sys|bindgen)$"

for package in sluice-wire sluice; do
  check "$package (default features)" "$always" -p "$package"
  check "$package (C-free: --no-default-features --features graviola)" "$c_free" \
    -p "$package" --no-default-features --features graviola
done

# The crash points of the reliability tests (connector/src/fault.rs) must not be in the shipped
# binary: `cargo build -p sluice` leaves the `fault-points` feature off.
static_binary="target/x86_64-unknown-linux-musl/release/sluice"
if [[ -f "$static_binary" ]]; then
  if grep -q "SLUICE_FAULT_POINT\|fault point" "$static_binary"; then
    echo "check-deps: $static_binary contains the test-only crash points (fault-points feature)" >&2
    failed=1
  else
    echo "check-deps: $static_binary: no crash points"
  fi
fi
exit "$failed"
