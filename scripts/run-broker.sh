#!/usr/bin/env bash
# Set up the Python package (quick once done), then run one broker in the foreground with
# config/server.properties (listener 127.0.0.1:9092, embedded coordination backend). Extra arguments go to
# kbroker-server, e.g.  bash scripts/run-broker.sh --override log.dirs=/tmp/kb-logs
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

bash scripts/setup.sh --python-only
PY="$(kb_python)"
# The console script sits next to the interpreter (also inside .venv, which is not on PATH).
SERVER="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")/kbroker-server"
[[ -x "$SERVER" ]] || SERVER="$(command -v kbroker-server)" || die "kbroker-server not found after setup"
log "exec $SERVER config/server.properties $*"
exec "$SERVER" config/server.properties "$@"
