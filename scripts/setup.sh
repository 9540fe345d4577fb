#!/usr/bin/env bash
# The one set-up step of the README's commands (`scripts/demo.sh`, `.ci/run`) and of
# `tests/postgres/server.sh`: checks for what they need and installs what is missing from
# Debian's packages, saying what it will install before it does.
#
#   scripts/setup.sh [rust] [java] [postgres] [image] [prometheus]
#
#   rust        checks only: cargo (stable Rust 1.89+) is there (see below)
#   java        Java 17 or newer (java and javac) and Maven: the local Kafka brokers run from
#               Maven Central jars, and the Java tools of the tests compile against them
#               (apt: openjdk-17-jdk-headless maven)
#   postgres    a PostgreSQL server (/usr/lib/postgresql/*/bin/initdb; apt: postgresql)
#   image       buildah, umoci and crun: scripts/build-image.sh builds the container image
#               without a daemon and connector/tests/image.rs runs it (apt: buildah umoci crun)
#   prometheus  Python's prometheus_client, whose parser checks `sluice read --metrics-addr`'s
#               output in the tests (pip: prometheus_client; python3 itself from apt)
#
# Rust (stable, 1.89+, with rustup) is not installed here: Debian's rustc is older than the
# minimum, and rustup is installed from rustup.rs; its absence is reported with that advice.
#
# Installing needs root (apt-get). Without it the script names the packages and exits 1.
# SLUICE_SETUP_DRY_RUN=1 prints what it would install and installs nothing. SLUICE_SETUP_APT
# and SLUICE_SETUP_PIP name the installers to run (default apt-get, python3 -m pip), so that a
# test can run the install path against stand-ins without touching the machine.
set -euo pipefail

APT="${SLUICE_SETUP_APT:-apt-get}"
PIP="${SLUICE_SETUP_PIP:-python3 -m pip}"
DRY_RUN="${SLUICE_SETUP_DRY_RUN:-0}"

say() { echo "setup.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

# The Debian packages each part still needs, on stdout (nothing when it is all there).
missing_java() {
  if ! command -v java >/dev/null || ! command -v javac >/dev/null || [[ "$(java_major)" -lt 17 ]]; then
    echo openjdk-17-jdk-headless
  fi
  command -v mvn >/dev/null || echo maven
  return 0
}
missing_postgres() {
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || echo postgresql
  return 0
}
missing_image() {
  local tool
  for tool in buildah umoci crun; do command -v "$tool" >/dev/null || echo "$tool"; done
  return 0
}
missing_python() {
  command -v python3 >/dev/null || echo python3 python3-pip
  return 0
}
prometheus_missing() { ! python3 -c 'import prometheus_client.parser' >/dev/null 2>&1; }

is_root() { [[ "$(id -u)" == 0 ]]; }

# apt_install PACKAGE...: says what and why, then installs (or only says so in a dry run).
apt_install() {
  [[ $# -gt 0 ]] || return 0
  say "will install with $APT: $* (from Debian's packages)"
  [[ "$DRY_RUN" == 1 ]] && { say "dry run: not installing"; return 0; }
  is_root || die "installing needs root: run 'apt-get install $*' as root (or with sudo), then run this again"
  $APT update >&2
  DEBIAN_FRONTEND=noninteractive $APT install -y --no-install-recommends "$@" >&2
}

report_found() {
  case "$1" in
    java)
      say "found Java $(java_major) ($(command -v java)), $(mvn -B -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g')"
      ;;
    postgres)
      say "found PostgreSQL $(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n1)"
      ;;
    image)
      say "found $(buildah --version), umoci $(umoci --version 2>/dev/null | sed -n 's/.*version //p'), $(crun --version | head -n1)"
      ;;
    prometheus)
      say "found prometheus_client $(python3 -c 'import prometheus_client, importlib.metadata as m; print(m.version("prometheus_client"))' 2>/dev/null)"
      ;;
  esac
}

parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(rust java)
for part in "${parts[@]}"; do
  if [[ "$part" == rust ]]; then
    command -v cargo >/dev/null \
      || die "cargo not found: install Rust (stable, 1.89 or newer) with rustup (https://rustup.rs), then run this again"
    say "found $(cargo --version)"
    continue
  fi
  case "$part" in
    java) packages=($(missing_java)) ;;
    postgres) packages=($(missing_postgres)) ;;
    image) packages=($(missing_image)) ;;
    prometheus) packages=($(missing_python)) ;;
    *) die "unknown part '$part' (rust, java, postgres, image or prometheus)" ;;
  esac
  if [[ ${#packages[@]} -gt 0 ]]; then
    apt_install "${packages[@]}"
  fi
  if [[ "$part" == prometheus ]] && prometheus_missing; then
    say "will install with $PIP: prometheus_client (from PyPI; the tests' Prometheus text parser)"
    if [[ "$DRY_RUN" == 1 ]]; then
      say "dry run: not installing"
    else
      $PIP install --quiet prometheus_client >&2 || die "$PIP install prometheus_client failed"
    fi
  fi
  if [[ "$DRY_RUN" != 1 ]]; then
    case "$part" in
      java) [[ -z "$(missing_java)" ]] || die "Java 17+ and Maven are still missing after installing" ;;
      postgres) [[ -z "$(missing_postgres)" ]] || die "no /usr/lib/postgresql/*/bin/initdb after installing" ;;
      image) [[ -z "$(missing_image)" ]] || die "$(missing_image | tr '\n' ' ')still missing after installing" ;;
      prometheus) if prometheus_missing; then die "python3 cannot import prometheus_client after installing"; fi ;;
    esac
    report_found "$part"
  fi
done
