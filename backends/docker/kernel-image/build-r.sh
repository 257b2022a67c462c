#!/usr/bin/env bash
# Builds the kernelbox R kernel image: the kernel image (build.sh's) plus Debian's R
# (r-base-core) and IRkernel (r-cran-irkernel, kernelspec "ir"), as one layer on top of
# it: apt-get runs in a container of the base image, which is then committed. The base
# image is read, never changed, and its layers are shared, so the R image costs only
# what R adds on disk.
#
# Usage: build-r.sh [IMAGE] [--base BASE] [--force]
#   IMAGE defaults to kernelbox/kernel-r:latest, BASE to kernelbox/kernel:latest (which
#   must exist: build.sh makes it). An existing IMAGE with the same recipe label, built
#   on the same BASE image id, is reused unless --force is given.
# The Debian mirror is read from this machine's apt sources (KERNELBOX_DEBIAN_MIRROR
# overrides), as build.sh does; the container reaches it over the host's network (as
# build.sh's chroot does), and the image keeps no apt sources.
set -euo pipefail

RECIPE=1
image="kernelbox/kernel-r:latest"
base="kernelbox/kernel:latest"
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --base) shift; base="${1:?build-r.sh: --base needs an image}" ;;
    -*) echo "build-r.sh: unknown flag $1" >&2; exit 2 ;;
    *) image="$1" ;;
  esac
  shift
done

base_id=$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null) ||
  { echo "build-r.sh: the base image $base is missing; build it first (kernelbox image build)" >&2; exit 1; }

if [ "$force" -eq 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  have=$(docker image inspect -f '{{index .Config.Labels "io.kernelbox.recipe-r"}} {{index .Config.Labels "io.kernelbox.base"}}' "$image" 2>/dev/null || true)
  if [ "$have" = "$RECIPE $base_id" ]; then
    echo "image $image already built (recipe $RECIPE on $base); reusing it"
    exit 0
  fi
  echo "image $image has recipe/base '${have}', want '$RECIPE $base_id'; rebuilding"
fi

# The same mirror lookup as build.sh's.
mirror() {
  if [ -n "${KERNELBOX_DEBIAN_MIRROR:-}" ]; then echo "$KERNELBOX_DEBIAN_MIRROR"; return; fi
  local f
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
  echo "build-r.sh: no Debian mirror found in /etc/apt/sources*; set KERNELBOX_DEBIAN_MIRROR" >&2
  exit 1
fi

name="kernelbox-build-r-$$"
work=$(mktemp -d /tmp/kernelbox-build-r.XXXXXX)
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# The apt source is bind-mounted, so that neither the mirror nor anything else of
# this machine's lands in the committed layer or the image's config.
echo "deb $mirror_url bookworm main" >"$work/sources.list"
chmod 0644 "$work/sources.list"

echo "apt-get install r-base-core r-cran-irkernel on $base ..."
docker run --name "$name" --user 0 --network host \
  -v "$work/sources.list:/etc/apt/sources.list:ro" "$base" /bin/bash -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends r-base-core r-cran-irkernel >/dev/null
  apt-get clean
  rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
  test -f /usr/share/jupyter/kernels/ir/kernel.json
  R --slave -e "library(IRkernel); stopifnot(capabilities(\"png\"))"
' >"$work/apt.log" 2>&1 || { tail -n 30 "$work/apt.log" >&2; exit 1; }

echo "docker commit -> $image ..."
# The base image's config, restored: the build container's user and command are not
# the image's.
docker commit \
  --change "LABEL io.kernelbox.recipe-r=$RECIPE" \
  --change "LABEL io.kernelbox.base=$base_id" \
  --change 'USER root' \
  --change 'CMD ["python3", "-m", "jupyter_server", "--help"]' \
  "$name" "$image" >/dev/null
docker image inspect -f 'built {{.Id}} ({{.Size}} bytes)' "$image"
