#!/usr/bin/env bash
# Builds librdkafka's own benchmark tool, examples/rdkafka_performance, from the librdkafka
# sources that rdkafka-sys bundles (the same librdkafka version as the rdkafka peer, from
# bench/peers/rdkafka/Cargo.lock), into bench/peers/rdkafka-perf/build/ (git-ignored). C is
# fine here: a bench peer, never part of the product.
#
#   bench/peers/rdkafka-perf/build.sh        # idempotent: skips the build when the binary exists
#
# zstd: the machine has no zstd headers, so the static libzstd that zstd-sys built for the
# rdkafka peer is used (bench/peers/rdkafka must be built first: `cargo build --release`).
# lz4 and zlib are librdkafka's builtin lz4 and the system zlib; no TLS, SASL or curl.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$HERE/build"
BIN="$OUT/librdkafka/examples/rdkafka_performance"
if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
PEER="$HERE/../rdkafka"
VERSION="$(grep -A1 '^name = "rdkafka-sys"' "$PEER/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p')"
REGISTRY="${CARGO_HOME:-$HOME/.cargo}/registry/src"
SRC="$(ls -d "$REGISTRY"/*/"rdkafka-sys-$VERSION"/librdkafka 2>/dev/null | head -1)"
[[ -n "$SRC" ]] || { echo "rdkafka-sys $VERSION sources not found under $REGISTRY: build bench/peers/rdkafka first" >&2; exit 1; }
ZSTD_OUT="$(dirname "$(ls "$PEER"/target/release/build/zstd-sys-*/out/libzstd.a 2>/dev/null | head -1)")"
[[ -f "$ZSTD_OUT/libzstd.a" && -f "$ZSTD_OUT/include/zstd.h" ]] || {
  echo "no libzstd.a from zstd-sys in $PEER/target/release/build: run cargo build --release in $PEER" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$SRC" "$OUT/librdkafka"
cd "$OUT/librdkafka"
chmod +x configure lds-gen.py 2>/dev/null || true
CPPFLAGS="-I$ZSTD_OUT/include" LDFLAGS="-L$ZSTD_OUT" ./configure --enable-zstd --disable-ssl --disable-gssapi \
  --disable-curl --disable-lz4-ext --enable-static --disable-syslog >"$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log" >&2; exit 1; }
grep -q '^#define WITH_ZSTD 1' config.h || { echo "configure did not enable zstd (see $OUT/configure.log)" >&2; exit 1; }
make -j"$(nproc)" -C src librdkafka.a >"$OUT/make.log" 2>&1 || { tail -30 "$OUT/make.log" >&2; exit 1; }
make -C examples rdkafka_performance >>"$OUT/make.log" 2>&1 || { tail -30 "$OUT/make.log" >&2; exit 1; }
echo "$BIN"
