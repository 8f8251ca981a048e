#!/bin/sh
# Container HEALTHCHECK of the method images: reads what the service wrote
# (health_file.py: "<grpc health status> <unix seconds>", every 5 s) instead of
# starting a gRPC client. Healthy only when the status is SERVING and fresh.
f="${NODEGROUND_HEALTH_FILE:-/tmp/nodeground-health}"
max_age="${NODEGROUND_HEALTH_MAX_AGE:-15}"
read -r status stamp < "$f" || { echo "no health file $f yet"; exit 1; }
age=$(( $(date +%s) - stamp ))
[ "$status" = SERVING ] || { echo "grpc health: $status"; exit 1; }
[ "$age" -le "$max_age" ] || { echo "grpc health last answered ${age}s ago"; exit 1; }
