# A `FROM scratch` image holding only the static, C-free `sluice` executable: no shell, no libc.
#   docker build -t sluice .
#   docker run --rm -v "$PWD:/work" sluice read --config /work/sluice.json --dest /work/out --mode bounded
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN scripts/build-static.sh

FROM scratch
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/sluice /sluice
ENTRYPOINT ["/sluice"]
