#!/usr/bin/env bash
# Installs what kernelbox's local backend, tests and demo need from Debian's packages.
# Idempotent: does nothing when every package is already installed.
#
# --gvisor also installs Debian's gVisor (runsc) and registers it with the local Docker
# daemon as the runtime "runsc" (scripts/gvisor.sh): the docker backend's --runtime runsc.
set -euo pipefail

gvisor=0
for a in "$@"; do
  case "$a" in
    --gvisor) gvisor=1 ;;
    *) echo "setup: unknown argument $a (known: --gvisor)" >&2; exit 2 ;;
  esac
done
if [ "$gvisor" = 1 ]; then
  "$(dirname "$0")/gvisor.sh"
fi

pkgs=(
  python3-jupyter-server python3-ipykernel python3-jupyter-client
  jupyter-notebook python3-websocket  # the Jupyter gateway tests: Notebook 6 and Jupyter Server pointed at kernelbox (--gateway-url)
  python3-pandas python3-matplotlib python3-nbclient python3-nbformat python3-dill
  python3-venv python3-pip python3-setuptools  # the Python package's install test: ./python into a fresh venv, offline
  debootstrap
  r-base-core r-cran-irkernel  # R sessions on the local backend (kernelspec "ir")
  iproute2 curl fuse-overlayfs  # the swarm lab (scripts/swarmlab): namespaces, a client on a node, the node daemons' storage driver where overlay2 cannot mount
  chromium  # the dashboard's browser test (headless, driven over the DevTools protocol)
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all Debian packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
