#!/usr/bin/env bash
# Installs Debian's gVisor (package runsc) and registers it with the local Docker daemon
# as the runtime "runsc", for the docker backend's --runtime runsc (docs/security.md,
# "Two walls"). Idempotent, and never restarts dockerd: it merges the runtime into
# /etc/docker/daemon.json (every other key kept), sends dockerd SIGHUP (a reload: running
# containers are untouched) only when the file changed, and waits until `docker info`
# lists the runtime.
#
# The runtime's arguments are what Debian's runsc 0.0~20221219 needs on a plain Docker
# host: --platform=ptrace (kvm hangs in many VMs), --network=none (its own netstack is not
# used: kernelbox sessions have no network, and without it every start fails in the
# root network namespace) and --fsgofer-host-uds (a process in the sandbox may connect
# to a unix socket the host listens on in a bind mount: how kernelbox reaches the
# session's server). Override them with KERNELBOX_RUNSC_ARGS (space-separated), for
# example a newer gVisor's "--platform=systrap --network=none --host-uds=open".
set -euo pipefail

conf=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
args=${KERNELBOX_RUNSC_ARGS:---platform=ptrace --network=none --fsgofer-host-uds}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

if ! dpkg-query -W -f='${Status}' runsc 2>/dev/null | grep -q 'install ok installed'; then
  echo "gvisor: installing runsc"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends runsc >/dev/null
fi
runsc=$(command -v runsc || echo /usr/bin/runsc)

# Merge with Debian's python3 (json only): other keys and other runtimes stay as they are.
changed=$($sudo /usr/bin/python3 - "$conf" "$runsc" "$args" <<'PY'
import json, os, sys
path, binary, args = sys.argv[1], sys.argv[2], sys.argv[3].split()
try:
    with open(path) as f:
        conf = json.load(f)
except FileNotFoundError:
    conf = {}
want = {"path": binary, "runtimeArgs": args}
if conf.get("runtimes", {}).get("runsc") == want:
    print("no")
    sys.exit(0)
conf.setdefault("runtimes", {})["runsc"] = want
os.makedirs(os.path.dirname(path), exist_ok=True)
tmp = path + ".kernelbox-tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
    f.flush()
    os.fsync(f.fileno())
os.chmod(tmp, 0o644)
os.replace(tmp, path)
print("yes")
PY
)

listed() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }
if [ "$changed" = yes ] || ! listed; then
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  if [ -z "$pid" ]; then
    echo "gvisor: dockerd's pid file /var/run/docker.pid is missing; reload dockerd by hand (kill -HUP <pid>)" >&2
    exit 1
  fi
  echo "gvisor: registered runsc in $conf; reloading dockerd (SIGHUP to pid $pid, no restart)"
  $sudo kill -HUP "$pid"
fi
for _ in $(seq 1 50); do
  if listed; then
    echo "gvisor: docker lists the runtime runsc ($($runsc --version 2>/dev/null | head -1))"
    exit 0
  fi
  sleep 0.2
done
echo "gvisor: docker info does not list runsc after the reload; see dockerd's log" >&2
exit 1
