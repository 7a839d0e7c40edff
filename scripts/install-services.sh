#!/usr/bin/env bash
# Install the servers that the lock tests start themselves (see
# shared/reference/services.md). Idempotent: installs only what is missing.
#
#   * ZooKeeper 3.8 from the Debian package `zookeeper` (NOT `zookeeperd`, which
#     adds a system service): provides /usr/share/java/zookeeper.jar and its
#     dependency jars. Tests start it as a foreground process they own
#     (tests/zookeeper.py); nothing is started here.
#   * slf4j-simple (package libslf4j-java), so the server logs to stderr;
#     without it ZooKeeper logs nothing at all.
#
# Needs root (apt-get). Quiet unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[install-services] %s\n' "$*" >&2; }

# Azurite, Microsoft's Azure Storage emulator (npm), for the az:// tests (tests/azurite_server.py):
# into .tools/azurite with the machine's Node.js and npm, no root needed. 3.35.0 is the last
# release that runs on Node.js 20 (3.36+ need 22). About 190 MB of node_modules.
AZURITE_VERSION=3.35.0
if [ "${TIDEMARK_AZURITE:-1}" = "1" ] && [ ! -x .tools/azurite/node_modules/.bin/azurite-blob ]; then
  if command -v npm >/dev/null 2>&1; then
    log "installing azurite@$AZURITE_VERSION (npm) into .tools/azurite"
    mkdir -p .tools/azurite
    npm install --prefix .tools/azurite --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >&2 ||
      { log "npm install azurite failed"; exit 1; }
  else
    log "npm not found: the az:// tests need Azurite (install Node.js and npm, then run this again)"
  fi
fi

packages=()
[ -f /usr/share/java/zookeeper.jar ] || packages+=(zookeeper)
if ! compgen -G '/usr/share/java/slf4j-simple*.jar' >/dev/null; then
  packages+=(libslf4j-java)
fi
if ! command -v java >/dev/null 2>&1; then
  packages+=(openjdk-17-jre-headless)
fi

if [ ${#packages[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  log "need root to install: ${packages[*]} (run: sudo bash $0)"
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run on this shared machine instead of failing at once.
apt_opts=(-o DPkg::Lock::Timeout=300 -qq)
apt_log=$(mktemp)
trap 'rm -f "$apt_log"' EXIT
log "installing ${packages[*]}"
if ! { apt-get "${apt_opts[@]}" update &&
       apt-get "${apt_opts[@]}" install -y --no-install-recommends "${packages[@]}"; } >"$apt_log" 2>&1; then
  cat "$apt_log" >&2
  log "apt-get failed (output above)"
  exit 1
fi

[ -f /usr/share/java/zookeeper.jar ] || { log "zookeeper.jar still missing after install"; exit 1; }
log "done: $(ls /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple*.jar | tr '\n' ' ')"
