#!/usr/bin/env bash
# Builds the static, C-free `sluice` executable for x86_64-unknown-linux-musl:
#   target/x86_64-unknown-linux-musl/release/sluice
# TLS uses rustls-graviola (Rust and assembly), so nothing here compiles C: CC points at a
# program that fails, and the build still succeeds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=x86_64-unknown-linux-musl
if ! rustup target list --installed | grep -qx "$target"; then
  rustup target add "$target"
fi
CC=false CXX=false CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols \
  cargo build --locked --release --target "$target" -p sluice --bin sluice --no-default-features --features graviola
binary="target/$target/release/sluice"
echo "build-static: $binary ($(stat -c %s "$binary") bytes)"
