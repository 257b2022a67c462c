#!/usr/bin/env bash
# Tears lab $1 down once the process recorded in $1/owner has ended.
L=$1
read -r pid start < "$L/owner"
alive() { [ -r /proc/$pid/stat ] && [ "$(awk '{sub(/.*\) /, ""); print $20}' /proc/$pid/stat 2>/dev/null)" = "$start" ]; }
while [ -d "$L" ] && alive; do sleep 1; done
[ -d "$L" ] && SWARMLAB_FROM_WATCH=1 "$(dirname "$0")/down.sh" "$L"
