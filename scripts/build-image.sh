#!/usr/bin/env bash
# Builds the container image from the Dockerfile without a Docker daemon: buildah (Debian's
# package; `scripts/setup.sh image` installs it) with the vfs storage driver, from the static
# binary of scripts/build-static.sh (the Dockerfile's `prebuilt` stage: nothing is pulled).
#
#   scripts/build-image.sh        # -> target/image/oci (an OCI image layout: one gzip layer)
#                                 #    and target/image/sluice-oci.tar (the same, as one
#                                 #    archive for `podman load` / `docker load`)
#
# Prints the image's size (the layer and the archive). Running it: connector/tests/image.rs
# unpacks the layout and runs it with crun on the host network.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v buildah >/dev/null || { echo "build-image: buildah not found: scripts/setup.sh image" >&2; exit 1; }
binary=target/x86_64-unknown-linux-musl/release/sluice
[[ -x "$binary" ]] || scripts/build-static.sh
out=target/image
rm -rf "$out/context" "$out/oci" "$out/sluice-oci.tar" "$out/tmp"
mkdir -p "$out/context"
cp "$binary" "$out/context/sluice"
# Storage of its own under target/, so that nothing outside the repository is touched. Big
# temporary files too: buildah stages each layer in $TMPDIR, /var/tmp by default, which on the CI
# machine is too small for the 11 MB layer (the commit then fails with "read/write on closed pipe").
mkdir -p "$out/tmp"
export TMPDIR="$PWD/$out/tmp"
storage=(--root "$PWD/$out/storage" --runroot "$PWD/$out/run" --storage-driver vfs)
buildah "${storage[@]}" bud --quiet --layers=false --build-arg SLUICE_BINARY_FROM=prebuilt \
  -f Dockerfile -t localhost/sluice:latest . >&2
buildah "${storage[@]}" push --quiet localhost/sluice:latest "oci:$out/oci:latest" >&2
buildah "${storage[@]}" push --quiet localhost/sluice:latest "oci-archive:$out/sluice-oci.tar:latest" >&2
layer_bytes=$(find "$out/oci/blobs" -type f -size +1M -printf '%s\n' | sort -n | tail -n1)
echo "build-image: $out/oci and $out/sluice-oci.tar: layer $layer_bytes bytes (gzip), archive $(stat -c %s "$out/sluice-oci.tar") bytes, binary $(stat -c %s "$binary") bytes"
