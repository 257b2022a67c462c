#!/usr/bin/env bash
# Builds the kernelbox kernel image from Debian packages, without any container registry:
# debootstrap a minimal bookworm root fs, install Jupyter Server + ipykernel + pandas +
# matplotlib with apt inside it, and `docker import` the tree.
#
# Usage: build.sh [IMAGE] [--force]
#   IMAGE defaults to kernelbox/kernel:latest. An existing image with the same recipe label
#   is reused unless --force is given.
# The Debian mirror is read from this machine's apt sources (KERNELBOX_DEBIAN_MIRROR overrides).
set -euo pipefail

RECIPE=4
image="kernelbox/kernel:latest"
force=0
for a in "$@"; do
  case "$a" in
    --force) force=1 ;;
    -*) echo "build.sh: unknown flag $a" >&2; exit 2 ;;
    *) image="$a" ;;
  esac
done

if [ "$force" -eq 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  have=$(docker image inspect -f '{{index .Config.Labels "io.kernelbox.recipe"}}' "$image" 2>/dev/null || true)
  if [ "$have" = "$RECIPE" ]; then
    echo "image $image already built (recipe $RECIPE); reusing it"
    exit 0
  fi
  echo "image $image has recipe '${have}', want $RECIPE; rebuilding"
fi

mirror() {
  if [ -n "${KERNELBOX_DEBIAN_MIRROR:-}" ]; then echo "$KERNELBOX_DEBIAN_MIRROR"; return; fi
  local f line
  # deb822 .sources files: the URIs of the stanza whose Suites name bookworm.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS=""; FS="\n"}
      /Suites:[^\n]*bookworm( |$|\n)/ && !/security/ {
        for (i=1;i<=NF;i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, " "); print u[1]; exit }
      }' "$f" && return
  done | head -n1
}
mirror_url=$(mirror)
if [ -z "$mirror_url" ]; then
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    line=$(grep -E '^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[a-z]+://' "$f" | grep -v security | head -n1 || true)
    if [ -n "$line" ]; then
      mirror_url=$(echo "$line" | sed -E 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}')
      break
    fi
  done
fi
if [ -z "$mirror_url" ]; then
  echo "build.sh: no Debian mirror found in /etc/apt/sources*; set KERNELBOX_DEBIAN_MIRROR" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "build.sh: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }

work=$(mktemp -d /var/tmp/kernelbox-image.XXXXXX)
cleanup() {
  umount "$work/rootfs/proc" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
rootfs="$work/rootfs"

echo "debootstrap bookworm (minbase) ..."
debootstrap --variant=minbase bookworm "$rootfs" "$mirror_url" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

echo "apt-get install python3-jupyter-server python3-ipykernel python3-pandas python3-matplotlib python3-pip ..."
# The image's sitecustomize.py (also in the Dockerfile): the user site, where pip
# installs, exists from the interpreter's start.
SITECUSTOMIZE='import os, site, sys
try:
    _d = site.getusersitepackages()
    if site.ENABLE_USER_SITE and not os.path.isdir(_d):
        os.makedirs(_d, exist_ok=True)
        site.addsitedir(_d)
except OSError:
    pass'
export SITECUSTOMIZE
mount -t proc proc "$rootfs/proc"
chroot "$rootfs" /usr/bin/env DEBIAN_FRONTEND=noninteractive SITECUSTOMIZE="$SITECUSTOMIZE" bash -c '
  set -e
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    python3-ipykernel python3-jupyter-server python3-pandas python3-matplotlib \
    python3-numpy python3-pil python3-dill python3-pip fonts-dejavu-core tini ca-certificates socat >/dev/null
  apt-get clean
  rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
  # The mirror this image was built from is not part of the image.
  : > /etc/apt/sources.list
  python3 -m compileall -q /usr/lib/python3/dist-packages >/dev/null 2>&1 || true
  useradd -u 1000 -m -d /home/kernel -s /bin/sh kernel
  mkdir -p /workspace && chmod 0777 /workspace
  # pip installs into the user site (the root is read-only in a session); it is
  # made and put on sys.path at every start, so a package pip installs imports in
  # the same kernel without a restart.
  for f in /etc/python3.*/sitecustomize.py; do printf "%s\n" "$SITECUSTOMIZE" >> "$f"; done
' >"$work/apt.log" 2>&1 || { tail -n 30 "$work/apt.log" >&2; exit 1; }
umount "$rootfs/proc"

echo "docker import -> $image ..."
tar -C "$rootfs" -c . | docker import \
  --change "LABEL io.kernelbox.recipe=$RECIPE" \
  --change 'ENV HOME=/tmp LANG=C.UTF-8 PYTHONUNBUFFERED=1 PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["python3", "-m", "jupyter_server", "--help"]' \
  - "$image" >/dev/null
docker image inspect -f 'built {{.Id}} ({{.Size}} bytes)' "$image"
