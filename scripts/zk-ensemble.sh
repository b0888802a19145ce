#!/usr/bin/env bash
# Local ZooKeeper ensemble from Debian's `zookeeper` package, for kbroker's cluster mode.
#
#   bash scripts/zk-ensemble.sh start  DIR [N]   # N nodes (default 3); prints the connect string on stdout
#   bash scripts/zk-ensemble.sh status DIR       # one line per node; exit 0 iff every node serves
#   bash scripts/zk-ensemble.sh stop   DIR       # SIGTERM, 10 s grace, then SIGKILL
#
# Layout of DIR: connect_string (one line), nodeI/{zoo.cfg,zookeeper.log,zk.pid,data/myid} for I = 1..N.
# Ports: client, quorum and election ports are all picked free on 127.0.0.1 (never 2181), recorded in zoo.cfg,
# and reused by a later `start DIR` so the connect string stays valid. tickTime=500 ms, admin server off,
# four-letter words allowed; a node serves when `srvr` reports "Mode: leader|follower|standalone".
# The JVMs run in their own session (setsid) so they outlive this script; `stop` ends exactly the pids it wrote.
# tests/integration/harness.py:ZkEnsemble is the in-process equivalent used by the test suite.
set -euo pipefail

ZK_CLASSPATH="${KBROKER_ZK_CLASSPATH:-/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar}"
ZK_MAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
PYTHON="${PYTHON:-python3}"
START_TIMEOUT="${ZK_START_TIMEOUT:-60}"   # seconds for the whole ensemble to elect a leader

die() { echo "zk-ensemble: $*" >&2; exit 1; }
usage() { die "usage: $0 start DIR [N] | stop DIR | status DIR"; }

# Send a four-letter word to 127.0.0.1:$1 with bash's /dev/tcp (no nc needed); prints the answer.
four_letter() {
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null || true
}

node_mode() { four_letter "$1" srvr | sed -n 's/^Mode: *//p'; }

client_port() { sed -n 's/^clientPort=//p' "$1/zoo.cfg"; }

node_dirs() { ls -d "$DIR"/node* 2>/dev/null | sort -V; }

# Alive = the pid we wrote still runs QuorumPeerMain on this node's zoo.cfg (guards against a recycled pid).
pid_alive() {
    [[ -f "$1/zk.pid" ]] || return 1
    local pid
    pid=$(cat "$1/zk.pid")
    kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$ZK_MAIN $1/zoo.cfg"
}

all_serving() {
    local d
    for d in $(node_dirs); do
        pid_alive "$d" || return 1
        [[ -n "$(node_mode "$(client_port "$d")")" ]] || return 1
    done
    return 0
}

write_configs() {
    local n=$1 i ports
    # 3 ports per node, distinct: every socket is held open until all are picked.
    ports=($("$PYTHON" - "$n" <<'EOF'
import socket, sys
socks = []
for _ in range(3 * int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
))
    for ((i = 1; i <= n; i++)); do
        local d="$DIR/node$i"
        mkdir -p "$d/data"
        echo "$i" > "$d/data/myid"
        {
            echo "tickTime=500"
            echo "initLimit=20"
            echo "syncLimit=10"
            echo "dataDir=$d/data"
            echo "clientPort=${ports[i - 1]}"
            echo "clientPortAddress=127.0.0.1"
            echo "maxClientCnxns=0"
            echo "admin.enableServer=false"
            echo "4lw.commands.whitelist=*"
            if ((n > 1)); then
                local j
                for ((j = 1; j <= n; j++)); do
                    echo "server.$j=127.0.0.1:${ports[n + j - 1]}:${ports[2 * n + j - 1]}"
                done
            fi
        } > "$d/zoo.cfg"
    done
}

connect_string() {
    local d out=""
    for d in $(node_dirs); do out+="${out:+,}127.0.0.1:$(client_port "$d")"; done
    echo "$out"
}

cmd_start() {
    local n=${1:-3}
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
    command -v java >/dev/null || die "java not found (run scripts/setup.sh)"
    local jar
    for jar in ${ZK_CLASSPATH//:/ }; do
        [[ -e "$jar" ]] || die "$jar not found (run scripts/setup.sh, which installs Debian's zookeeper package)"
    done
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd)"
    if [[ -z "$(node_dirs)" ]]; then
        echo "zk-ensemble: writing configs for $n nodes under $DIR" >&2
        write_configs "$n"
    fi
    local d
    for d in $(node_dirs); do
        if pid_alive "$d"; then
            echo "zk-ensemble: $(basename "$d") already running (pid $(cat "$d/zk.pid"))" >&2
            continue
        fi
        echo "zk-ensemble: starting $(basename "$d") (client port $(client_port "$d"))" >&2
        setsid nohup java -Xms32m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
            -Dzookeeper.admin.enableServer=false "-Dzookeeper.4lw.commands.whitelist=*" \
            -Dorg.slf4j.simpleLogger.showDateTime=true "-Dzookeeper.log.dir=$d" \
            -cp "$ZK_CLASSPATH" "$ZK_MAIN" "$d/zoo.cfg" >> "$d/zookeeper.log" 2>&1 < /dev/null &
        echo $! > "$d/zk.pid"
    done
    local deadline=$((SECONDS + START_TIMEOUT))
    until all_serving; do
        for d in $(node_dirs); do
            pid_alive "$d" || { tail -n 30 "$d/zookeeper.log" >&2; die "$(basename "$d") exited; see $d/zookeeper.log"; }
        done
        ((SECONDS < deadline)) || { cmd_status >&2 || true; die "no quorum after ${START_TIMEOUT}s; logs in $DIR/node*/zookeeper.log"; }
        sleep 0.2  # poll interval of the bounded wait above
    done
    connect_string > "$DIR/connect_string"
    echo "zk-ensemble: serving" >&2
    cat "$DIR/connect_string"
}

cmd_status() {
    [[ -n "$(node_dirs)" ]] || die "no ensemble under $DIR"
    local d rc=0 mode
    for d in $(node_dirs); do
        if pid_alive "$d"; then
            mode="$(node_mode "$(client_port "$d")")"
            echo "$(basename "$d") pid=$(cat "$d/zk.pid") port=$(client_port "$d") mode=${mode:-not-serving}"
            [[ -n "$mode" ]] || rc=1
        else
            echo "$(basename "$d") stopped port=$(client_port "$d")"
            rc=1
        fi
    done
    echo "connect=$(connect_string)"
    return $rc
}

cmd_stop() {
    local d pid
    for d in $(node_dirs); do
        pid_alive "$d" || { rm -f "$d/zk.pid"; continue; }
        pid=$(cat "$d/zk.pid")
        kill -TERM "$pid"
        local deadline=$((SECONDS + 10))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        rm -f "$d/zk.pid"
        echo "zk-ensemble: stopped $(basename "$d") (pid $pid)" >&2
    done
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
