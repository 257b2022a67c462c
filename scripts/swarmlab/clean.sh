#!/usr/bin/env bash
# Tears down the labs under $1 whose owner process is gone (a run killed before its
# watchdog could act, or a machine restarted): only directories this harness made,
# recognised by their owner and id files.
root=${1:?usage: clean.sh ROOT}
here=$(cd "$(dirname "$0")" && pwd)
for L in "$root"/*/; do
  L=${L%/}
  [ -f "$L/id" ] && [ -f "$L/owner" ] || continue
  read -r pid start < "$L/owner"
  if [ -r /proc/$pid/stat ] && [ "$(awk '{sub(/.*\) /, ""); print $20}' /proc/$pid/stat 2>/dev/null)" = "$start" ]; then
    continue
  fi
  echo "swarmlab: tearing down $L (owner $pid is gone)"
  "$here/down.sh" "$L"
done
