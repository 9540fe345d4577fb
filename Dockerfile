# A `FROM scratch` image holding only the static, C-free `sluice` executable: no shell, no libc,
# run as an unprivileged user (65532, "nonroot").
#
#   docker build -t sluice .                     # compiles inside the rust image (the build stage)
#   docker run --rm -v "$PWD:/work" sluice read --config /work/sluice.json --dest /work/out --mode bounded
#
# scripts/build-image.sh builds the same image without a daemon (buildah, from Debian's packages)
# from the binary scripts/build-static.sh made on the host: it passes
# `--build-arg SLUICE_BINARY_FROM=prebuilt`, so the build stage is skipped and nothing is pulled.
ARG SLUICE_BINARY_FROM=build

FROM docker.io/library/rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN scripts/build-static.sh && mkdir -p /out && cp target/x86_64-unknown-linux-musl/release/sluice /out/sluice

FROM scratch AS prebuilt
COPY target/image/context/sluice /out/sluice

FROM ${SLUICE_BINARY_FROM} AS binary

FROM scratch
COPY --from=binary /out/sluice /sluice
USER 65532:65532
ENTRYPOINT ["/sluice"]
