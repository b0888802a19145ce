#!/usr/bin/env bash
# A local kbroker cluster: N broker processes on a local 3-node ZooKeeper ensemble (scripts/zk-ensemble.sh).
#
#   bash scripts/cluster.sh start  DIR [N] [--override key=value ...]   # default N=3; prints the bootstrap string
#   bash scripts/cluster.sh status DIR    # ensemble + one line per broker + controller; exit 0 iff all serve
#   bash scripts/cluster.sh stop   DIR    # brokers one at a time (SIGTERM = controlled shutdown), then ZooKeeper
#
# Layout of DIR:
#   zk/                        the ensemble (zk-ensemble.sh layout; zk/connect_string)
#   brokerI/server.properties  broker.id=I (I = 0..N-1), a free loopback port, log.dirs=brokerI/logs,
#                              zookeeper.connect = the ensemble + chroot /kbroker, then the --override lines
#   brokerI/broker.log         stdout+stderr, appended across starts;  brokerI/broker.pid
#   bootstrap                  host:port,host:port,... (one line)
# A later `start DIR` reuses every server.properties (same ports, ids and data), so restarts keep their logs;
# --override on a later start is appended to each existing server.properties (later lines win).
# Readiness: every broker answers a Metadata v1 request listing all N brokers and a controller (bounded wait).
# Brokers run in their own session (setsid) so they outlive this script; `stop` ends exactly the pids it wrote.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

START_TIMEOUT="${CLUSTER_START_TIMEOUT:-90}"   # seconds for all brokers to see each other and a controller
# A broker's SIGTERM path runs controlled shutdown (up to controlled.shutdown.max.retries=3 attempts,
# retry.backoff 5 s apart) before it flushes and exits: 60 s covers that with margin before SIGKILL.
STOP_TIMEOUT="${CLUSTER_STOP_TIMEOUT:-60}"
CHROOT=/kbroker
PY="$(kb_python)"

usage() { die "usage: $0 start DIR [N] [--override key=value ...] | status DIR | stop DIR"; }

broker_dirs() { ls -d "$DIR"/broker* 2>/dev/null | sort -V; }

prop() { sed -n "s/^$2=//p" "$1/server.properties" | tail -n 1; }

broker_port() { prop "$1" listeners | sed 's/.*://'; }

# Alive = the pid we wrote still runs kbroker.cli.server on this broker's config (guards against recycled pids).
broker_alive() {
    [[ -f "$1/broker.pid" ]] || return 1
    local pid
    pid=$(cat "$1/broker.pid")
    kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null \
        | grep -q -- "kbroker.cli.server $1/server.properties"
}

# Metadata v1 (no topics) to 127.0.0.1:$1; prints "<broker count> <controller id>" or nothing when it does not
# answer. Frame: int32 size, header v1 (api_key 3, version 1, correlation id, client id), int32 0 topics.
# Response v1: correlation id, brokers [node_id int32, host string, port int32, rack nullable string],
# controller_id int32, ...
probe() {
    "$PY" - "$1" <<'EOF' 2>/dev/null || true
import socket, struct, sys
cid = b"cluster.sh"
body = struct.pack(">hhih", 3, 1, 7, len(cid)) + cid + struct.pack(">i", 0)
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
    s.settimeout(2)
    s.sendall(struct.pack(">i", len(body)) + body)
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf
    data = exact(struct.unpack(">i", exact(4))[0])
pos = 4
(count,) = struct.unpack_from(">i", data, pos); pos += 4
for _ in range(count):
    pos += 4
    (hlen,) = struct.unpack_from(">h", data, pos); pos += 2 + hlen + 4
    (rlen,) = struct.unpack_from(">h", data, pos); pos += 2 + max(rlen, 0)
(controller,) = struct.unpack_from(">i", data, pos)
print(count, controller)
EOF
}

write_config() {
    local d=$1 id=$2 port=$3 zk=$4
    mkdir -p "$d/logs"
    {
        echo "# written by scripts/cluster.sh"
        echo "broker.id=$id"
        echo "listeners=PLAINTEXT://127.0.0.1:$port"
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
        echo "log.dirs=$d/logs"
        echo "zookeeper.connect=$zk$CHROOT"
        echo "zookeeper.session.timeout.ms=6000"
    } > "$d/server.properties"
}

free_ports() {
    "$PY" - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

bootstrap() {
    local d out=""
    for d in $(broker_dirs); do out+="${out:+,}127.0.0.1:$(broker_port "$d")"; done
    echo "$out"
}

all_ready() {
    local n=$1 d answer
    for d in $(broker_dirs); do
        broker_alive "$d" || return 1
        answer="$(probe "$(broker_port "$d")")"
        [[ -n "$answer" ]] || return 1
        read -r count controller <<< "$answer"
        ((count == n && controller >= 0)) || return 1
    done
    return 0
}

cmd_start() {
    local n=3
    if [[ $# -gt 0 && "$1" != --* ]]; then n=$1; shift; fi
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
    local overrides=()
    while [[ $# -gt 0 ]]; do
        [[ "$1" == --override && $# -ge 2 && "$2" == *=* ]] || usage
        overrides+=("$2")
        shift 2
    done
    # The project's .venv and ZooKeeper (quick once done); its output goes to stderr: stdout is the bootstrap string.
    bash "$REPO/scripts/setup.sh" --cluster >&2
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd)"
    local zk
    zk="$(bash "$REPO/scripts/zk-ensemble.sh" start "$DIR/zk" 3 | tail -n 1)"
    if [[ -z "$(broker_dirs)" ]]; then
        local ports i
        ports=($(free_ports "$n"))
        for ((i = 0; i < n; i++)); do write_config "$DIR/broker$i" "$i" "${ports[i]}" "$zk"; done
    fi
    n=$(broker_dirs | wc -l)
    local d o
    for d in $(broker_dirs); do
        for o in "${overrides[@]+"${overrides[@]}"}"; do echo "$o" >> "$d/server.properties"; done
        if broker_alive "$d"; then
            log "$(basename "$d") already running (pid $(cat "$d/broker.pid"))"
            continue
        fi
        rm -f "$d/broker.pid"
        log "starting $(basename "$d") (broker.id $(prop "$d" broker.id), port $(broker_port "$d"))"
        echo "=== cluster.sh: start at $(date +%T)" >> "$d/broker.log"
        # setsid may fork, so the child writes its own pid before exec'ing the server.
        (cd "$d" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
            setsid nohup bash -c 'echo $$ > "$1/broker.pid"; exec "$2" -m kbroker.cli.server "$1/server.properties"' \
            _ "$d" "$PY" >> "$d/broker.log" 2>&1 < /dev/null &)
        local wait_pid=$((SECONDS + 5))
        until [[ -s "$d/broker.pid" ]] || ((SECONDS >= wait_pid)); do sleep 0.05; done
    done
    local deadline=$((SECONDS + START_TIMEOUT))
    until all_ready "$n"; do
        for d in $(broker_dirs); do
            broker_alive "$d" || { tail -n 30 "$d/broker.log" >&2; die "$(basename "$d") exited; see $d/broker.log"; }
        done
        ((SECONDS < deadline)) || { cmd_status >&2 || true; die "cluster not ready after ${START_TIMEOUT}s"; }
        sleep 0.5  # poll interval of the bounded wait above
    done
    bootstrap > "$DIR/bootstrap"
    log "serving: $n brokers, zookeeper.connect=$zk$CHROOT"
    cat "$DIR/bootstrap"
}

cmd_status() {
    [[ -n "$(broker_dirs)" ]] || die "no cluster under $DIR"
    local rc=0 d answer n
    bash "$REPO/scripts/zk-ensemble.sh" status "$DIR/zk" || rc=1
    n=$(broker_dirs | wc -l)
    for d in $(broker_dirs); do
        if broker_alive "$d"; then
            answer="$(probe "$(broker_port "$d")")"
            if [[ -n "$answer" ]]; then
                read -r count controller <<< "$answer"
                echo "$(basename "$d") pid=$(cat "$d/broker.pid") port=$(broker_port "$d") sees=$count/$n controller=$controller"
                ((count == n)) || rc=1
            else
                echo "$(basename "$d") pid=$(cat "$d/broker.pid") port=$(broker_port "$d") not-answering"
                rc=1
            fi
        else
            echo "$(basename "$d") stopped port=$(broker_port "$d")"
            rc=1
        fi
    done
    echo "bootstrap=$(bootstrap)"
    return $rc
}

cmd_stop() {
    local d pid
    for d in $(broker_dirs); do
        broker_alive "$d" || { rm -f "$d/broker.pid"; continue; }
        pid=$(cat "$d/broker.pid")
        kill -TERM "$pid"
        local deadline=$((SECONDS + STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$(basename "$d") (pid $pid) still running after ${STOP_TIMEOUT}s: SIGKILL"
            kill -KILL "$pid"
        fi
        rm -f "$d/broker.pid"
        log "stopped $(basename "$d") (pid $pid)"
    done
    [[ -d "$DIR/zk" ]] && bash "$REPO/scripts/zk-ensemble.sh" stop "$DIR/zk"
    return 0
}

[[ $# -ge 2 ]] || usage
CMD=$1 DIR=$2
shift 2
case "$CMD" in
    start) cmd_start "$@" ;;
    status) cmd_status ;;
    stop) cmd_stop ;;
    *) usage ;;
esac
