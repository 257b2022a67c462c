#!/usr/bin/env bash
# Builds kernelbox/serve: an image holding only the static kernelbox binary and the
# few files it needs (a passwd, the system's TLS roots; no base image, no
# registry), for running `kernelbox serve --backend swarm` in a container on a
# swarm manager (docs/swarm.md).
#
# Usage: scripts/serve-image.sh [IMAGE]       IMAGE defaults to kernelbox/serve:latest
#   env: DOCKER_HOST (the daemon to import into; default the local one),
#        KERNELBOX_BINARY (a static kernelbox binary to use instead of building one).
set -euo pipefail
image=${1:-kernelbox/serve:latest}
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
bin=${KERNELBOX_BINARY:-}
if [ -z "$bin" ]; then
  bin=$root/kernelbox.bin
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/kernelbox)
fi
mkdir -p "$root/img/etc" "$root/img/tmp" "$root/img/srv" "$root/img/var/lib/kernelbox"
chmod 1777 "$root/img/tmp"
chmod 0700 "$root/img/var/lib/kernelbox"
install -m 0755 "$bin" "$root/img/kernelbox"
# The system's roots: the egress proxy verifies the hosts it intercepts for a
# template's secrets with them, and the kernels' CA bundle starts with them.
for roots in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  if [ -s "$roots" ]; then
    install -D -m 0644 "$roots" "$root/img/etc/ssl/certs/ca-certificates.crt"
    break
  fi
done
echo 'root:x:0:0:root:/tmp:/kernelbox' > "$root/img/etc/passwd"
echo 'root:x:0:' > "$root/img/etc/group"
tar -C "$root/img" --numeric-owner --owner=0 --group=0 -c . |
  docker import -c 'ENTRYPOINT ["/kernelbox"]' -c 'ENV HOME=/tmp' -m "kernelbox serve image (static binary only)" - "$image" >/dev/null
echo "built $image ($(du -h "$root/img/kernelbox" | cut -f1) binary)"
