#!/usr/bin/env bash
# Set up what the README's quickstart needs (scripts/setup.sh --broker: the project's .venv and kcat; quick once
# done), then run one broker in the foreground with config/server.properties (listener 127.0.0.1:9092, embedded
# coordination backend). Extra arguments go to kbroker-server, e.g.
#   bash scripts/run-broker.sh --override log.dirs=/tmp/kb-logs
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

bash scripts/setup.sh --broker
SERVER="$VENV/bin/kbroker-server"
[[ -x "$SERVER" ]] || die "$SERVER missing after setup"
log "exec $SERVER config/server.properties $*"
exec "$SERVER" config/server.properties "$@"
