#!/usr/bin/env bash
# Runs a command beside N busy processes of its own (a CPU load, as on a laptop that builds
# something else meanwhile) and exits with the command's status; the busy processes are
# stopped however the command ends. Usage: under-load.sh N COMMAND [ARG...]
#   tools/scripts/under-load.sh 4 cargo test --workspace
set -uo pipefail
if [ "$#" -lt 2 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 N COMMAND [ARG...]   (N busy processes beside COMMAND)" >&2
  exit 2
fi
n="$1"
shift
busy=()
stop() {
  if [ "${#busy[@]}" -gt 0 ]; then
    kill "${busy[@]}" 2>/dev/null
    wait "${busy[@]}" 2>/dev/null
  fi
  busy=()
}
trap stop EXIT INT TERM
for _ in $(seq "$n"); do
  yes >/dev/null &
  busy+=("$!")
done
echo "under-load: $n busy processes (${busy[*]}) beside: $*" >&2
"$@"
status=$?
stop
exit "$status"
