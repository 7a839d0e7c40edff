#!/usr/bin/env bash
# Set up everything tidemark needs on a fresh Debian machine, idempotently:
# Java 17 (if `java` is missing), a virtual environment in .venv, and the
# package with its test and spark extras (TIDEMARK_EXTRAS overrides them). Safe to run again: it only
# installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

apt_install() {
  # apt-get needs root; on a shared machine run this script with sudo.
  if [ ! -f /var/lib/apt/periodic/tidemark-updated ] ; then
    apt-get update -qq >/dev/null
    mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/tidemark-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v java >/dev/null 2>&1; then
  log "installing Java 17 (openjdk-17-jre-headless) for Spark"
  apt_install openjdk-17-jre-headless
fi

if [ "${TIDEMARK_SERVICES:-1}" = "1" ]; then
  # ZooKeeper for the multi-writer tests and lock provider (Debian package; started by the tests).
  bash scripts/install-services.sh
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating virtual environment .venv"
  "$PY" -m venv .venv
fi

# The demo and the tests need Spark (the spark extra) and hudi-rs, pytest, ruff, mypy (test).
EXTRAS=${TIDEMARK_EXTRAS:-test,spark,aws}
# The stamp follows what the install builds from: the package's metadata and its one C file.
stamp=".venv/.tidemark-installed-$(cat pyproject.toml setup.py src/tidemark/format/_murmur.c | sha1sum | cut -c1-12)-${EXTRAS//,/_}"
if [ ! -f "$stamp" ]; then
  log "installing tidemark[$EXTRAS] and its dependencies (the first time builds the pyspark wheel: a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$EXTRAS]"
  touch "$stamp"
fi
log "ready: $(.venv/bin/python --version), $(java -version 2>&1 | head -1)"
