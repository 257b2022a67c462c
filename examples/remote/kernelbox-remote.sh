#!/bin/sh
# kernelbox in front of Enterprise Gateway (or any Jupyter Server / Kernel Gateway).
# NOT TESTED HERE against Enterprise Gateway (no Kubernetes cluster where kernelbox
# is built); the same flags are tested against Jupyter Servers on loopback.
set -eu

# The token stays out of the process list: kernelbox reads it from the environment.
KERNELBOX_GATEWAY_TOKEN="$(cat /etc/kernelbox/eg-token)"
export KERNELBOX_GATEWAY_TOKEN

exec kernelbox serve \
  --backend remote \
  --gateway https://eg.example.com \
  --gateway-ca /etc/kernelbox/eg-ca.pem \
  --kernel-name python_kubernetes \
  --kernel-env KERNEL_USERNAME=kernelbox \
  --kernel-env KERNEL_NAMESPACE=kernelbox-kernels \
  --kernel-env KERNEL_SERVICE_ACCOUNT_NAME=kernelbox-kernel \
  --idle-timeout 30m \
  --workspace /var/lib/kernelbox \
  --workdir /srv/agent-data \
  --listen 127.0.0.1:8700
