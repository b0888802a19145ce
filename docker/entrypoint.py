"""The kbroker image's entrypoint: KAFKA_* environment variables -> server.properties, checks, then kbroker-server.

It does what Confluent's cp-kafka image does in ZooKeeper mode (its /etc/confluent/docker/{run,configure,ensure,
launch} and the `env_to_props` of confluent-docker-utils), so a compose file or a Kubernetes manifest written for
cp-kafka starts kbroker with the same environment:

Mapping (``env_to_key``), applied to every variable whose name starts with ``KAFKA_``, after the prefix is cut and
the rest lower-cased:

    one ``_`` between two other characters -> ``.``    KAFKA_BROKER_ID          -> broker.id
    ``___`` (three)                          -> ``-``    KAFKA_FOO___BAR          -> foo-bar
    ``__`` (two)                             -> ``_``    KAFKA_CONFLUENT__X_Y     -> confluent_x.y
    (other runs of underscores stay as they are, as dub's regular expression leaves them: ____ -> -_)

Variables that are not broker keys (``NOT_KEYS``): the JVM/launcher ones (KAFKA_HEAP_OPTS, KAFKA_JMX_*, ...) are
ignored with one line each saying why; KAFKA_OPTS is left in the broker's environment (kbroker reads the JAAS file
of its ``-Djava.security.auth.login.config``); KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET becomes
``zookeeper.clientCnxnSocket`` (cp-kafka's one irregular name). Logging, as cp-kafka's log4j template does it:
KAFKA_LOG4J_ROOT_LOGLEVEL becomes ``--log-level`` (the root logger's level); KAFKA_LOG4J_LOGGERS
(``name=LEVEL,name=LEVEL``) becomes ``log4j.logger.<name>=<LEVEL>`` lines appended to kbroker's built-in logging
configuration, written as logging.properties next to the properties (where kbroker-server looks for it). kbroker's
logger names are its modules (kbroker.controller, kbroker.server.connection, ...) plus Kafka's state.change.logger
and kafka.request.logger; a Kafka class name (kafka.controller.KafkaController) names no kbroker logger.

cp-kafka's rules around the mapping (``configure``, ``ensure``):
- KAFKA_LISTENERS, when unset, is KAFKA_ADVERTISED_LISTENERS with every host replaced by 0.0.0.0 (listen on every
  interface, advertise the given names). cp-kafka requires KAFKA_ADVERTISED_LISTENERS and KAFKA_ZOOKEEPER_CONNECT;
  kbroker does not: without ZooKeeper it runs alone on its embedded coordination store, and without listeners it
  listens on every interface at 9092 and advertises the container's host name (kbroker's own defaults).
- KAFKA_LOG_DIRS defaults to /var/lib/kafka/data (cp-kafka's path: a volume made for cp-kafka is mounted at the
  same place, and kbroker reads Kafka's log layout); every log directory must be writable.
- KAFKA_PORT, KAFKA_HOST, KAFKA_ADVERTISED_PORT, KAFKA_ADVERTISED_HOST stop the start (exit 1), as in cp-kafka.
- SSL secrets: KAFKA_SSL_KEYSTORE_FILENAME / KAFKA_SSL_TRUSTSTORE_FILENAME name files in the secrets directory
  (/etc/kafka/secrets) -> ssl.keystore.location / ssl.truststore.location; KAFKA_SSL_KEY_CREDENTIALS,
  KAFKA_SSL_KEYSTORE_CREDENTIALS, KAFKA_SSL_TRUSTSTORE_CREDENTIALS name files there holding the passwords ->
  ssl.key.password / ssl.keystore.password / ssl.truststore.password. kbroker reads PKCS12 or PEM stores, not JKS.
- Before starting, it waits for ZooKeeper: up to KAFKA_CUB_ZK_TIMEOUT seconds (default 40, cp-kafka's) for one
  server of zookeeper.connect to answer the ``srvr`` four-letter word (whitelisted by default in ZooKeeper >= 3.5)
  with ``Mode: leader|follower|standalone``; skipped when KAFKA_ZOOKEEPER_SSL_CLIENT_ENABLE=true, as cp-kafka does.

Image defaults (``DEFAULTS``, any KAFKA_* variable overrides them): the metrics and health endpoint on
0.0.0.0:9404 (metrics.http.port / metrics.http.host), which the image's HEALTHCHECK asks for /readyz.

Usage (the image's ENTRYPOINT is ``python /opt/kbroker/entrypoint.py``):
    entrypoint.py [KEY=VALUE ...]      cp-kafka's ``run``: the pairs are put in the environment first, then start
    entrypoint.py healthcheck          exit 0 when the broker is ready (HTTP /readyz, or, without a metrics port,
                                       an answered ApiVersions on the first advertised listener), 1 otherwise
    entrypoint.py print-config         write nothing, start nothing: print the properties the environment gives
    entrypoint.py COMMAND [ARGS ...]   anything else runs as given (``kbroker-admin topics --list ...``)

Files: the properties go to $KBROKER_CONFIG (default /etc/kbroker/server.properties); secrets are read from
$KBROKER_SECRETS_DIR (default /etc/kafka/secrets). The broker is started with ``os.execv`` (same pid: the signals a
container runtime sends reach kbroker-server directly; SIGTERM is a controlled shutdown).

Standard library only: it also runs outside the image (tests/integration/test_docker_entrypoint.py).
"""
import os
import re
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

PREFIX = "KAFKA_"
DEFAULT_CONFIG = "/etc/kbroker/server.properties"
DEFAULT_SECRETS_DIR = "/etc/kafka/secrets"
DEFAULT_LOG_DIRS = "/var/lib/kafka/data"
DEFAULT_ZK_TIMEOUT_S = 40

# Keys the image sets unless the environment does (as KAFKA_* variables would).
DEFAULTS = {
    "log.dirs": DEFAULT_LOG_DIRS,
    "metrics.http.port": "9404",
    "metrics.http.host": "0.0.0.0",
}

# cp-kafka's excluded variables (kafka.properties.template) and the ones its scripts consume: never broker keys.
_JVM = "a JVM/log4j launcher setting; kbroker has no JVM (ignored)"
NOT_KEYS = {
    "KAFKA_VERSION": "the image's Kafka version (ignored)",
    "KAFKA_HEAP_OPTS": _JVM,
    "KAFKA_LOG4J_OPTS": _JVM,
    "KAFKA_JMX_OPTS": _JVM + "; metrics are on metrics.http.port",
    "KAFKA_JMX_PORT": _JVM + "; metrics are on metrics.http.port",
    "KAFKA_JMX_HOSTNAME": _JVM + "; metrics are on metrics.http.host",
    "KAFKA_JVM_PERFORMANCE_OPTS": _JVM,
    "KAFKA_GC_LOG_OPTS": _JVM,
    "KAFKA_LOG4J_LOGGERS": "-> log4j.logger.<name>=<LEVEL> lines in logging.properties next to the properties",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL": _JVM,
    "KAFKA_OPTS": "left in the broker's environment: kbroker reads -Djava.security.auth.login.config (JAAS) "
                  "from it; other -D options have no effect",
    "KAFKA_LOG4J_ROOT_LOGLEVEL": "passed as kbroker-server --log-level",
    "KAFKA_DATA_DIRS": "cp-kafka's writable check of the data directory; kbroker checks every log.dirs entry",
    "KAFKA_CUB_ZK_TIMEOUT": "seconds to wait for ZooKeeper before starting",
    "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET": "-> zookeeper.clientCnxnSocket",
    "KAFKA_SSL_KEYSTORE_FILENAME": "-> ssl.keystore.location (a file in the secrets directory)",
    "KAFKA_SSL_TRUSTSTORE_FILENAME": "-> ssl.truststore.location (a file in the secrets directory)",
    "KAFKA_SSL_KEY_CREDENTIALS": "-> ssl.key.password (read from a file in the secrets directory)",
    "KAFKA_SSL_KEYSTORE_CREDENTIALS": "-> ssl.keystore.password (read from a file in the secrets directory)",
    "KAFKA_SSL_TRUSTSTORE_CREDENTIALS": "-> ssl.truststore.password (read from a file in the secrets directory)",
}
# cp-kafka's configure refuses these (the pre-0.10 listener keys) with exactly these messages.
DEPRECATED = {
    "KAFKA_ADVERTISED_PORT": "advertised.port is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead.",
    "KAFKA_ADVERTISED_HOST": "advertised.host is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead.",
    "KAFKA_HOST": "host is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead.",
    "KAFKA_PORT": "port is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead.",
}
# (location variable, key) and (credentials variable, key) of cp-kafka's SSL handling.
SSL_FILES = (("KAFKA_SSL_KEYSTORE_FILENAME", "ssl.keystore.location"),
             ("KAFKA_SSL_TRUSTSTORE_FILENAME", "ssl.truststore.location"))
SSL_CREDENTIALS = (("KAFKA_SSL_KEY_CREDENTIALS", "ssl.key.password"),
                   ("KAFKA_SSL_KEYSTORE_CREDENTIALS", "ssl.keystore.password"),
                   ("KAFKA_SSL_TRUSTSTORE_CREDENTIALS", "ssl.truststore.password"))

# One underscore with a non-underscore on each side (confluent-docker-utils' dub.env_to_props).
_SINGLE_UNDERSCORE = re.compile(r"(?<=[^_])_(?=[^_])")
# scheme://host:port -- host is a name, an IPv4 address, [an IPv6 address] or empty.
_LISTENER = re.compile(r"^(?P<name>[^:/\s]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?\d+)$")
_SRVR_MODES = (b"Mode: leader", b"Mode: follower", b"Mode: standalone")
_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
LOGGING_MARKER = "# Written by the kbroker image's entrypoint: kbroker's built-in logging config + KAFKA_LOG4J_LOGGERS."


class EntrypointError(Exception):
    """A setting that must stop the start; the message is printed as is and the exit status is 1."""


def env_to_key(name, prefix=PREFIX):
    """The broker key of environment variable `name` (which starts with `prefix`), by cp-kafka's rule."""
    raw = name[len(prefix):].lower()
    dotted = ".".join(_SINGLE_UNDERSCORE.split(raw))
    return "_".join("-".join(dotted.split("___")).split("__"))


def listeners_from_advertised(advertised):
    """cp-kafka's ``cub listeners``: every advertised endpoint's host replaced by 0.0.0.0 (IPv6 hosts by ::)."""
    out = []
    for item in advertised.split(","):
        item = item.strip()
        m = _LISTENER.match(item)
        if m is None:
            raise EntrypointError("KAFKA_ADVERTISED_LISTENERS: %r is not NAME://host:port" % item)
        wildcard = "[::]" if m.group("host").startswith("[") else "0.0.0.0"
        out.append("%s://%s:%s" % (m.group("name"), wildcard, m.group("port")))
    return ",".join(out)


def _read_secret(secrets_dir, var, env):
    path = os.path.join(secrets_dir, env[var])
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as e:
        raise EntrypointError("%s: cannot read %s: %s" % (var, path, e.strerror)) from None


def build_config(env, secrets_dir=DEFAULT_SECRETS_DIR):
    """(props, notes, log_level) for environment `env`.

    props: broker key -> value (str), DEFAULTS first, then the mapped variables; notes: one line per variable that
    is not a broker key, saying what became of it; log_level: KAFKA_LOG4J_ROOT_LOGLEVEL or None.
    Raises EntrypointError for what cp-kafka refuses (the deprecated listener variables, an unreadable secret).
    """
    for var, message in DEPRECATED.items():
        if env.get(var):
            if var in ("KAFKA_PORT", "KAFKA_HOST") and "://" in env[var]:
                message += (" (%s=%s looks like a Kubernetes service link of a service named 'kafka': set "
                            "enableServiceLinks: false in the pod spec)" % (var, env[var]))
            raise EntrypointError(message)
    props = dict(DEFAULTS)
    notes = []
    for var in sorted(env):
        if not var.startswith(PREFIX) or var == PREFIX:
            continue
        if var in NOT_KEYS:
            notes.append("%s: %s" % (var, NOT_KEYS[var]))
            continue
        props[env_to_key(var)] = env[var]
    if env.get("KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET"):
        props["zookeeper.clientCnxnSocket"] = env["KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET"]
    if not props.get("listeners") and props.get("advertised.listeners"):
        props["listeners"] = listeners_from_advertised(props["advertised.listeners"])
    for var, key in SSL_FILES:
        if env.get(var):
            props[key] = os.path.join(secrets_dir, env[var])
    for var, key in SSL_CREDENTIALS:
        if env.get(var):
            props[key] = _read_secret(secrets_dir, var, env)
    return props, notes, env.get("KAFKA_LOG4J_ROOT_LOGLEVEL") or None


def parse_loggers(text):
    """KAFKA_LOG4J_LOGGERS (``name=LEVEL,name=LEVEL``, cp-kafka's parse_log4j_loggers) -> [(name, LEVEL)].

    Unlike cp-kafka, which drops a malformed item silently, a malformed item or an unknown level stops the start."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, level = (p.strip() for p in item.partition("="))
        if not sep or not name or level.upper() not in _LEVELS:
            raise EntrypointError("KAFKA_LOG4J_LOGGERS: %r is not logger=LEVEL (LEVEL one of %s)"
                                  % (item, ", ".join(_LEVELS)))
        out.append((name, level.upper()))
    return out


def render_logging(loggers, base):
    """logging.properties text: `base` (kbroker's built-in configuration) with each (name, LEVEL) applied.

    A logger `base` configures keeps its appenders and additivity and takes the new level (``log4j.logger.X=INFO,
    controllerAppender`` -> ``=DEBUG, controllerAppender``: replacing the whole line would leave a non-additive
    logger with no appender, i.e. silent); any other gets a ``log4j.logger.<name>=<LEVEL>`` line at the end, which
    logs through the root logger's appenders."""
    lines = base.rstrip("\n").split("\n")
    extra = []
    for name, level in loggers:
        prefix = "log4j.logger.%s=" % name
        hits = [i for i, l in enumerate(lines) if l.replace(" ", "").startswith(prefix)]
        if hits:
            for i in hits:
                appenders = lines[i].split("=", 1)[1].split(",")[1:]
                lines[i] = prefix + ",".join([level] + appenders)
        else:
            extra.append(prefix + level)
    out = [LOGGING_MARKER] + lines
    if extra:
        out += ["", "# KAFKA_LOG4J_LOGGERS"] + extra
    return "\n".join(out) + "\n"


def write_logging(env, config_path, log=None):
    """Write logging.properties next to `config_path` for KAFKA_LOG4J_LOGGERS (None when unset; then a file this
    entrypoint wrote before is removed, so a variable taken out takes its lines with it). A logging.properties
    the entrypoint did not write (mounted by the operator) is left alone, and KAFKA_LOG4J_LOGGERS with it is an
    error: the two would contradict each other."""
    path = os.path.join(os.path.dirname(os.path.abspath(config_path)), "logging.properties")
    ours = False
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            ours = f.readline().rstrip("\n") == LOGGING_MARKER
    if not env.get("KAFKA_LOG4J_LOGGERS"):
        if ours:
            os.remove(path)
        return None
    if os.path.exists(path) and not ours:
        raise EntrypointError("KAFKA_LOG4J_LOGGERS is set and %s was not written by the entrypoint (a mounted "
                              "logging configuration): set the levels in that file instead" % path)
    loggers = parse_loggers(env["KAFKA_LOG4J_LOGGERS"])
    from kbroker.cli.logging_config import DEFAULT_PROPERTIES  # the image's kbroker; only needed here
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(render_logging(loggers, DEFAULT_PROPERTIES))
    os.replace(path + ".tmp", path)
    if log is not None:
        log("wrote %s (%s)" % (path, ", ".join("%s=%s" % l for l in loggers)))
    return path


def _escape(text, key=False):
    """java.util.Properties escaping: backslash, line breaks, tabs; a leading space; in keys also = : and space."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") \
        .replace("\f", "\\f")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out


def render_properties(props):
    """server.properties text: a header line, then ``key=value`` lines sorted by key, escaped."""
    lines = ["# Written by the kbroker image's entrypoint from the KAFKA_* environment (docker/entrypoint.py)."]
    lines += ["%s=%s" % (_escape(k, key=True), _escape(v)) for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def _mask(key, value):
    return "[hidden]" if ("password" in key or key.endswith("jaas.config")) else value


def check_log_dirs(log_dirs):
    """Create each directory of `log_dirs` (comma-separated) if missing; each must be writable (EntrypointError)."""
    for d in (p.strip() for p in log_dirs.split(",")):
        if not d:
            continue
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise EntrypointError("log.dirs: cannot create %s: %s (uid %d)" % (d, e.strerror, os.getuid())) from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise EntrypointError("log.dirs: %s is not writable by uid %d (a volume owned by another user? the image "
                                  "runs as uid 1000)" % (d, os.getuid()))


def zk_servers(connect):
    """(host, port) of every server of a zookeeper.connect string (the chroot cut off; port 2181 if absent)."""
    hosts = connect.split("/", 1)[0]
    out = []
    for item in hosts.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.lstrip(":") or "2181"
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "2181")
        out.append((host, int(port)))
    return out


def zk_serving(host, port, timeout=2.0):
    """True when the ZooKeeper server at host:port answers ``srvr`` as a leader, follower or standalone server."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"srvr")
            data = b""
            while len(data) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    return any(mode in data for mode in _SRVR_MODES)


def wait_for_zookeeper(connect, timeout_s, log, clock=time.monotonic, sleep=time.sleep):
    """Block until one server of `connect` serves (True) or `timeout_s` seconds pass (False)."""
    servers = zk_servers(connect)
    deadline = clock() + timeout_s
    while True:
        for host, port in servers:
            if zk_serving(host, port):
                log("ZooKeeper %s:%d is serving" % (host, port))
                return True
        if clock() >= deadline:
            return False
        sleep(1.0)


def _log(msg):
    print("===> %s" % msg, file=sys.stderr, flush=True)


def configure(env, config_path, secrets_dir, log=_log):
    """Everything before the exec: map, check, write `config_path`. Returns the kbroker-server argument list."""
    props, notes, log_level = build_config(env, secrets_dir)
    for note in notes:
        log(note)
    check_log_dirs(props.get("log.dirs", ""))
    os.makedirs(os.path.dirname(os.path.abspath(config_path)), exist_ok=True)
    tmp = config_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render_properties(props))
    os.replace(tmp, config_path)
    for k in sorted(props):
        log("  %s=%s" % (k, _mask(k, props[k])))
    log("wrote %s (%d keys)" % (config_path, len(props)))
    write_logging(env, config_path, log)
    connect = (props.get("zookeeper.connect") or "").strip()
    if connect and str(props.get("zookeeper.ssl.client.enable", "")).lower() != "true":
        timeout_s = float(env.get("KAFKA_CUB_ZK_TIMEOUT") or DEFAULT_ZK_TIMEOUT_S)
        log("waiting up to %gs for ZooKeeper (%s)" % (timeout_s, connect))
        if not wait_for_zookeeper(connect, timeout_s, log):
            raise EntrypointError("ZooKeeper %s not serving after %gs (KAFKA_CUB_ZK_TIMEOUT)" % (connect, timeout_s))
    args = [config_path]
    if log_level:
        args += ["--log-level", log_level]
    return args


# ------------------------------------------------------------------------------------------------ healthcheck

def _read_properties(path):
    """The key=value lines of a file this module wrote (no continuation lines; escapes of '\\\\' only matter in
    values the healthcheck does not read)."""
    props = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, _, v = line.partition("=")
                props[k.replace("\\", "")] = v
    return props


def _api_versions_answered(host, port, timeout):
    """True when host:port answers an ApiVersions v0 request (int16 key 18, int16 version 0, int32 correlation id,
    int16-length client id; size-prefixed) with the same correlation id."""
    client = b"kbroker-healthcheck"
    body = struct.pack(">hhih", 18, 0, 0x6B62, len(client)) + client
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    return struct.unpack(">ii", head)[1] == 0x6B62


def healthcheck(config_path, timeout=4.0):
    """0 when the broker configured in `config_path` is ready, else 1 (the reason on stderr).

    With metrics.http.port > 0: GET /readyz on 127.0.0.1 (or metrics.http.host when it names one address) must
    answer 200. Without it: the first listener must answer ApiVersions (serving, though maybe not yet ready)."""
    try:
        props = _read_properties(config_path)
    except OSError as e:
        print("healthcheck: cannot read %s: %s" % (config_path, e.strerror), file=sys.stderr)
        return 1
    port = int(props.get("metrics.http.port") or -1)
    if port > 0:
        host = props.get("metrics.http.host") or "127.0.0.1"
        if host in ("0.0.0.0", "::", "[::]"):
            host = "127.0.0.1"
        url = "http://%s:%d/readyz" % (host, port)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return 0 if r.status == 200 else 1
        except urllib.error.HTTPError as e:
            print("healthcheck: %s answered %d" % (url, e.code), file=sys.stderr)
        except (OSError, ValueError) as e:
            print("healthcheck: %s: %s" % (url, e), file=sys.stderr)
        return 1
    listeners = props.get("listeners") or "PLAINTEXT://:9092"
    m = _LISTENER.match(listeners.split(",")[0].strip())
    if m is None:
        print("healthcheck: cannot parse listeners=%s" % listeners, file=sys.stderr)
        return 1
    host = m.group("host").strip("[]")
    host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    if _api_versions_answered(host, int(m.group("port")), timeout):
        return 0
    print("healthcheck: %s:%s does not answer ApiVersions" % (host, m.group("port")), file=sys.stderr)
    return 1


# ------------------------------------------------------------------------------------------------------- main

def _is_assignment(arg):
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", arg, re.S) is not None


def main(argv=None, environ=None):
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if environ is None else environ
    config_path = env.get("KBROKER_CONFIG") or DEFAULT_CONFIG
    secrets_dir = env.get("KBROKER_SECRETS_DIR") or DEFAULT_SECRETS_DIR
    if argv and argv[0] == "healthcheck":
        return healthcheck(config_path)
    if argv and argv[0] == "print-config":
        try:
            props, notes, _ = build_config(env, secrets_dir)
        except EntrypointError as e:
            print(e, file=sys.stderr)
            return 1
        sys.stdout.write(render_properties(props))
        return 0
    if argv and not _is_assignment(argv[0]):
        os.execvp(argv[0], argv)  # any other command, e.g. kbroker-admin
    for pair in argv:  # cp-kafka's run: "docker run image KAFKA_BROKER_ID=2 ..."
        name, _, value = pair.partition("=")
        env[name] = value
    try:
        server_args = configure(env, config_path, secrets_dir)
    except EntrypointError as e:
        print("kbroker entrypoint: %s" % e, file=sys.stderr, flush=True)
        return 1
    _log("launching kbroker-server (uid %d)" % os.getuid())
    cmd = [sys.executable, "-m", "kbroker.cli.server"] + server_args
    os.execve(sys.executable, cmd, dict(env))
    return 0  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(main())
