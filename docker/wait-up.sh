#!/bin/sh
# Wait until every method container of a compose project answers: `make up` runs this after
# `compose up`, so an `orchestrator run` started right after it finds the services up.
#   docker/wait-up.sh PROJECT SECONDS
# A container is up when Docker calls it healthy (gRPC health SERVING), or when its service writes
# NOT_SERVING to its health file: it answers, but a GFM's weights are missing or fail their
# checksum (methods/sdk/readiness.py). Such a service turns healthy by itself within seconds of
# `make weights`; waiting for it here would only time out, so it is reported with its reason and
# the command that fixes it. Exit 1 when some container does not answer within SECONDS.
set -u
project="$1"
seconds="$2"
docker="${DOCKER:-docker}"

# One line per method container: "<name> healthy|weights|starting".
states() {
  for id in $($docker ps -q --filter "label=com.docker.compose.project=$project" --filter label=nodeground.family); do
    line=$($docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}healthy{{end}}' "$id") || continue
    name=${line%% *}
    name=${name#/}
    case "$line" in
      *" healthy") echo "$name healthy" ;;
      *)
        status=$($docker exec "$id" sh -c 'cat "${NODEGROUND_HEALTH_FILE:-/tmp/nodeground-health}"' 2>/dev/null)
        case "$status" in
          NOT_SERVING*) echo "$name weights" ;;
          *) echo "$name starting" ;;
        esac ;;
    esac
  done
}

i=0
while :; do
  i=$((i + 1))
  st=$(states)
  if [ -n "$st" ] && ! echo "$st" | grep -q ' starting$'; then break; fi
  if [ "$i" -ge "$seconds" ]; then
    echo "services not answering after ${seconds}s:" >&2
    echo "$st" | grep ' starting$' >&2
    exit 1
  fi
  sleep 1
done

healthy=$(echo "$st" | awk '$2 == "healthy" {printf " %s", $1}')
[ -z "$healthy" ] || echo "services healthy after ${i}s:$healthy"
echo "$st" | awk '$2 == "weights" {print $1}' | while read -r name; do
  reason=$($docker logs --tail 200 "$name" 2>&1 | grep 'not ready: ' | tail -1 | sed 's/.*not ready: //')
  echo "$name: up, not serving until its weights verify (fetch them: make weights; it turns healthy by itself): ${reason:-weights missing}"
done
exit 0
