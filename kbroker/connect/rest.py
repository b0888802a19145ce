"""Kafka Connect's REST API (Kafka's ConnectorsResource, ConnectorPluginsResource and RootResource) over the stdlib's
threading HTTP server: every request gets its own thread, and the herder (kbroker/connect/herder.py) serialises what
must be serialised. This module only translates HTTP to herder calls and herder answers/errors to HTTP.

Wire format (Kafka's, so curl scripts, Connect UIs and Kafka's own RestClient work unchanged):

- Bodies are JSON, UTF-8, written compactly (``{"name":"x"}``: no spaces, as Jackson writes them); every answer but
  204 carries ``Content-Type: application/json`` and a Content-Length (HTTP/1.1 keep-alive works).
- Errors are ``{"error_code": <http status>, "message": "..."}`` (Kafka's ErrorMessage). An unknown path is
  ``404 {"error_code":404,"message":"HTTP 404 Not Found"}`` and a known path with another method
  ``405 ... "HTTP 405 Method Not Allowed"`` (Jersey's texts); a task id that is not an int is an unknown path (404).
- Config maps are maps of strings: a JSON number or boolean in a config is taken as its text (``1`` -> ``"1"``,
  ``true`` -> ``"true"``), as Jackson does for ``Map<String, String>``; a nested object or array is refused.
  A body that is not JSON answers 500 with the parser's message (Kafka's exception mapper answers 500 for Jackson's
  errors too); a body over ``MAX_BODY`` bytes answers 413 without being read.
- Status codes: 200 reads, 201 create (``Location: <url>/connectors/<name>``), 200 update (PUT config of an existing
  connector), 202 pause/resume/topics reset and restart with ``includeTasks``/``onlyFailed``, 204 delete, stop,
  restart and task restart; 400 bad config/request, 404 unknown connector/task, 409 exists / rebalance / no leader,
  500 anything else, 503 while the herder starts or stops.
- CORS: with ``access.control.allow.origin`` set (a comma list, or ``*``), a request whose ``Origin`` is allowed
  gets ``Access-Control-Allow-Origin: <origin>`` (+ ``-Credentials: true``, ``Vary: Origin``); a preflight
  ``OPTIONS`` asking for one of ``access.control.allow.methods`` (default GET,POST,HEAD, Jetty's) also gets
  ``-Allow-Methods``, ``-Allow-Headers`` and ``-Max-Age: 1800``. ``OPTIONS`` answers 200 with ``Allow`` anyway.

Forwarding (Kafka's HerderRequestHandler): when the herder raises ``NotLeaderError(leader_url)`` the same request
goes to ``<leader_url><path>?forward=<recursive>&<the request's own query>`` and its status and body are answered
as they are. ``forward`` absent (a user's request) -> forward with ``forward=true`` (one more hop allowed);
``forward=true`` -> forward with ``forward=false``; ``forward=false`` -> 409 "Cannot complete request because of a
conflicting operation (e.g. worker rebalance)". No known leader -> 409. A forwarded request that cannot be sent
answers 500 "IO Error trying to forward REST request: ...", as Kafka's RestClient.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kbroker.connect.exceptions import (BadRequestError, ConfigError, ConnectError, NotFoundError, NotLeaderError,
                                        RebalanceNeededError, ServiceUnavailableError)

log = logging.getLogger("kbroker.connect.rest")

# Request bodies are connector configs (a few KB); 16 MiB bounds one request's memory with a margin of 1000x.
MAX_BODY = 16 * 1024 * 1024
# Kafka's rest request timeout (RestServer.DEFAULT_REST_REQUEST_TIMEOUT_MS): bounds a forwarded request.
FORWARD_TIMEOUT_S = 90.0
# Open REST connections (each holds a thread); Jetty's default thread pool under Kafka's REST server is 200.
MAX_CONNECTIONS = 200
# An idle keep-alive connection gives its thread back after this long (Jetty's idle timeout is 30 s).
IDLE_TIMEOUT_S = 30.0

NO_LEADER_MESSAGE = ("Cannot complete request momentarily due to no known leader URL, likely because a rebalance "
                     "was underway.")
TWO_HOPS_MESSAGE = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
STALE_CONFIG_MESSAGE = ("Cannot complete request momentarily due to stale configuration (typically caused by a "
                        "concurrent config change)")
HEALTHY_MESSAGE = "Worker has completed startup and is ready to handle requests."


def kafka_version():
    """The version ``GET /`` reports: kbroker's installed version (there is no Kafka jar to ask)."""
    from importlib import metadata
    try:
        return metadata.version("kbroker")
    except metadata.PackageNotFoundError:   # a source tree that was never installed
        return "unknown"


def commit_id():
    """``GET /``'s ``commit``: the git commit of the source tree when there is one, else "unknown" (Kafka's
    AppInfoParser answers "unknown" too when its jar has no commit)."""
    import os
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short=16", "HEAD"], capture_output=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    text = out.stdout.decode("ascii", "replace").strip()
    return text if out.returncode == 0 and text else "unknown"


class HttpError(ConnectError):
    """An answer decided by the REST layer itself (Kafka's ConnectRestException): ``status`` and message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _dumps(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _error_body(status, message):
    return _dumps({"error_code": status, "message": message})


# ---------------------------------------------------------------------------------------------------- request
class Request:
    """One parsed HTTP request, as a route's function sees it."""

    def __init__(self, server, method, path, query, raw_body, headers, args):
        self.server = server
        self.herder = server.herder
        self.method = method
        self.path = path                  # the request's path, as it came (still percent-encoded)
        self.query = query                # {name: [values]}
        self.raw_body = raw_body          # bytes (b"" when none)
        self.headers = headers
        self.args = args                  # the path's variable segments, decoded (connector name, task id)

    def param(self, name, default=None):
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name):
        """A boolean query parameter (``?includeTasks=true``): Java's Boolean.valueOf, default false."""
        return str(self.param(name, "false")).lower() == "true"

    def json(self, required=True, numbers_as_text=True):
        """The body as JSON; numbers keep their text (Jackson's coercion to String for config maps) unless
        ``numbers_as_text`` is false."""
        if not self.raw_body.strip():
            if required:   # Kafka: 500 (a null request object); the message says what is missing
                raise HttpError(500, "The request has no body (a JSON object is required)")
            return None
        try:
            if not numbers_as_text:
                return json.loads(self.raw_body.decode("utf-8"))
            return json.loads(self.raw_body.decode("utf-8"), parse_int=str, parse_float=str)
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(500, "Cannot parse the request body as JSON: %s" % e) from None

    def config_body(self, value=None, allow_null=False):
        """A config map from the body (or ``value``): {str: str}; null values kept only with ``allow_null``."""
        body = self.json() if value is None else value
        return config_map(body, allow_null)


def config_map(body, allow_null=False):
    if not isinstance(body, dict):
        raise HttpError(500, "Cannot deserialize a config map from a JSON %s" % _json_kind(body))
    out = {}
    for key, value in body.items():
        if value is None:
            if not allow_null:
                raise BadRequestError("Config %s has a null value" % key)
            out[key] = None
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, str):
            out[key] = value
        else:
            raise HttpError(500, "Cannot deserialize value of type `java.lang.String` from %s value (config %s)"
                            % (_json_kind(value), key))
    return out


def _json_kind(value):
    return {dict: "Object", list: "Array"}.get(type(value), type(value).__name__)


class Answer:
    """A route's answer: status, JSON-able body (None: no body), extra headers."""
    __slots__ = ("status", "body", "headers", "raw")

    def __init__(self, status, body=None, headers=None, raw=None):
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.raw = raw                    # bytes answered as they are (a forwarded answer)


# ---------------------------------------------------------------------------------------------------- routes
def root(req):
    return Answer(200, {"version": req.server.version, "commit": req.server.commit,
                        "kafka_cluster_id": req.herder.kafka_cluster_id()})


def health(req):
    try:
        req.herder.connectors()
    except ServiceUnavailableError as e:
        detail = str(e)
        return Answer(503, {"status": "starting",
                            "message": "Worker is still starting up." + (" " + detail if detail else "")})
    return Answer(200, {"status": "healthy", "message": HEALTHY_MESSAGE})


def list_connectors(req):
    expansions = req.query.get("expand")
    names = req.herder.connectors()
    if not expansions:
        return Answer(200, names)
    out = {}
    for name in names:
        entry = {}
        try:
            for expansion in expansions:
                if expansion == "status":
                    entry["status"] = req.herder.connector_status(name)
                elif expansion == "info":
                    entry["info"] = req.herder.connector_info(name)
                # any other expansion is ignored, as Kafka's (it logs it)
        except NotFoundError:
            continue              # deleted between the listing and the lookup
        out[name] = entry
    return Answer(200, out)


def _check_and_put_name(name, config):
    """Kafka's checkAndPutConnectorConfigName: a ``name`` in the config must equal the URL's / request's name."""
    included = config.get("name")
    if included is not None:
        if included != name:
            raise BadRequestError("Connector name configuration (%s) doesn't match connector name in the URL (%s)"
                                  % (included, name))
    else:
        config["name"] = name


INITIAL_STATES = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}


def _created(req, name, created, info):
    if not created:
        return Answer(200, info)
    return Answer(201, info, {"Location": req.server.location(req, "/connectors/" + urllib.parse.quote(name))})


def create_connector(req):
    body = req.json()
    if not isinstance(body, dict):
        raise HttpError(500, "Cannot deserialize a create request from a JSON %s" % _json_kind(body))
    name = body.get("name")
    name = "" if name is None else str(name).strip()
    if body.get("config") is None:   # Kafka: 500 (a null config map)
        raise HttpError(500, "Connector config must be specified (the request has no \"config\" object)")
    config = req.config_body(body["config"])
    _check_and_put_name(name, config)
    kwargs = {}
    initial = body.get("initial_state")
    if initial is not None:
        state = INITIAL_STATES.get(str(initial).upper())
        if state is None:            # Kafka: 500 (Jackson cannot build the enum)
            raise HttpError(500, "Unknown initial state: %s (one of RUNNING, PAUSED, STOPPED)" % initial)
        kwargs["target_state"] = state
    created, info = req.herder.put_connector_config(name, config, False, **kwargs)
    return _created(req, name, True, info)


def get_connector(req):
    return Answer(200, req.herder.connector_info(req.args[0]))


def delete_connector(req):
    req.herder.delete_connector(req.args[0])
    return Answer(204)


def get_config(req):
    return Answer(200, req.herder.connector_config(req.args[0]))


def put_config(req):
    name = req.args[0]
    config = req.config_body()
    _check_and_put_name(name, config)
    created, info = req.herder.put_connector_config(name, config, True)
    return _created(req, name, created, info)


def patch_config(req):
    """KIP-477: the patch's keys replace the config's, a null value removes the key; the connector must exist."""
    name = req.args[0]
    patch = req.config_body(allow_null=True)
    config = dict(req.herder.connector_config(name))
    for key, value in patch.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    _, info = req.herder.put_connector_config(name, config, True)
    return Answer(200, info)


def connector_status(req):
    return Answer(200, req.herder.connector_status(req.args[0]))


def task_configs(req):
    return Answer(200, req.herder.task_configs(req.args[0]))


def put_task_configs(req):
    """Kafka's internal ``POST /connectors/{name}/tasks``: a worker running the connector hands the task configs
    it generated to the leader (distributed mode; 204)."""
    put = getattr(req.herder, "put_task_configs", None)
    if put is None:
        raise NotFoundError("Task configs can only be written in distributed mode")
    put(req.args[0], req.json())
    return Answer(204)


def task_status(req):
    return Answer(200, req.herder.task_status(req.args[0], req.args[1]))


def connector_offsets(req):
    return Answer(200, req.herder.connector_offsets(req.args[0]))


def alter_offsets(req):
    body = req.json(numbers_as_text=False)    # offsets are JSON values: {"position": 3} stays a number
    offsets = body.get("offsets") if isinstance(body, dict) else None
    if not offsets:
        raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
    if not isinstance(offsets, list) or not all(isinstance(o, dict) for o in offsets):
        raise HttpError(500, "Cannot deserialize the offsets: a JSON array of {\"partition\", \"offset\"} objects "
                             "is required")
    return Answer(200, req.herder.alter_connector_offsets(req.args[0], offsets))


def reset_offsets(req):
    return Answer(200, req.herder.reset_connector_offsets(req.args[0]))


def pause(req):
    req.herder.pause_connector(req.args[0])
    return Answer(202)


def resume(req):
    req.herder.resume_connector(req.args[0])
    return Answer(202)


def stop(req):
    req.herder.stop_connector(req.args[0])
    return Answer(204)


def restart_connector(req):
    """KIP-745: without ``includeTasks``/``onlyFailed`` the connector alone restarts (204); with them the herder
    restarts the connector and/or tasks they select and the answer (202) is the status with RESTARTING marks."""
    name = req.args[0]
    include_tasks, only_failed = req.flag("includeTasks"), req.flag("onlyFailed")
    if not include_tasks and not only_failed:
        req.herder.restart_connector(name)
        return Answer(204)
    return Answer(202, req.herder.restart_connector_and_tasks(name, include_tasks, only_failed))


def restart_task(req):
    req.herder.restart_task(req.args[0], req.args[1])
    return Answer(204)


def active_topics(req):
    if not req.server.topic_tracking:
        raise HttpError(403, "Topic tracking is disabled.")
    name = req.args[0]
    return Answer(200, {name: {"topics": req.herder.connector_active_topics(name)}})


def reset_active_topics(req):
    if not req.server.topic_tracking:
        raise HttpError(403, "Topic tracking is disabled.")
    if not req.server.topic_tracking_reset:
        raise HttpError(403, "Topic tracking reset is disabled.")
    req.herder.reset_connector_active_topics(req.args[0])
    return Answer(202)


def connector_plugins(req):
    only_connectors = req.param("connectorsOnly", "true").lower() != "false"
    if only_connectors or not hasattr(req.herder, "all_plugins"):
        return Answer(200, req.herder.connector_plugins())
    return Answer(200, req.herder.all_plugins())


def plugin_config(req):
    """KIP-769: the plugin's own config definition, ``[ConfigKeyInfo, ...]``."""
    return Answer(200, req.herder.connector_plugin_config(req.args[0]))


def _normalized_plugin(name):
    return name[:-len("Connector")] if name.endswith("Connector") and len(name) > len("Connector") else name


def validate(req):
    plugin = req.args[0]
    config = req.config_body()
    included = config.get("connector.class")
    if included is not None and not _normalized_plugin(included).endswith(_normalized_plugin(plugin)):
        raise BadRequestError("Included connector type %s does not match request type %s" % (included, plugin))
    try:
        return Answer(200, req.herder.validate_connector_config(plugin, config))
    except (BadRequestError, ConfigError) as e:
        # Kafka validates on an executor: the failure reaches its mapper wrapped, as a 500 naming the class
        raise HttpError(500, "org.apache.kafka.connect.runtime.rest.errors.BadRequestException: %s" % e) from None


NAME = object()     # a path segment that is a connector (or plugin) name
TASK = object()     # a path segment that is a task id (an int; anything else is an unknown path)

# (path pattern, {method: (function, forwards)}): ``forwards`` marks the requests Kafka forwards to the leader.
ROUTES = [
    ((), {"GET": (root, False)}),
    (("health",), {"GET": (health, False)}),
    (("connectors",), {"GET": (list_connectors, False), "POST": (create_connector, True)}),
    (("connectors", NAME), {"GET": (get_connector, False), "DELETE": (delete_connector, True)}),
    (("connectors", NAME, "config"), {"GET": (get_config, False), "PUT": (put_config, True),
                                      "PATCH": (patch_config, True)}),
    (("connectors", NAME, "status"), {"GET": (connector_status, False)}),
    (("connectors", NAME, "tasks"), {"GET": (task_configs, False), "POST": (put_task_configs, True)}),
    (("connectors", NAME, "tasks", TASK, "status"), {"GET": (task_status, False)}),
    (("connectors", NAME, "tasks", TASK, "restart"), {"POST": (restart_task, True)}),
    (("connectors", NAME, "offsets"), {"GET": (connector_offsets, False), "PATCH": (alter_offsets, True),
                                       "DELETE": (reset_offsets, True)}),
    (("connectors", NAME, "pause"), {"PUT": (pause, False)}),
    (("connectors", NAME, "resume"), {"PUT": (resume, False)}),
    (("connectors", NAME, "stop"), {"PUT": (stop, True)}),
    (("connectors", NAME, "restart"), {"POST": (restart_connector, True)}),
    (("connectors", NAME, "topics"), {"GET": (active_topics, False)}),
    (("connectors", NAME, "topics", "reset"), {"PUT": (reset_active_topics, False)}),
    (("connector-plugins",), {"GET": (connector_plugins, False)}),
    (("connector-plugins", NAME, "config"), {"GET": (plugin_config, False)}),
    (("connector-plugins", NAME, "config", "validate"), {"PUT": (validate, False)}),
]

_INT = re.compile(r"-?[0-9]{1,10}\Z")


def match_route(segments):
    """(methods, args) of the route matching the decoded path ``segments``, or (None, None)."""
    for pattern, methods in ROUTES:
        if len(pattern) != len(segments):
            continue
        args = []
        for want, got in zip(pattern, segments):
            if want is NAME:
                args.append(got)
            elif want is TASK:
                if not _INT.match(got):
                    break
                args.append(int(got))
            elif want != got:
                break
        else:
            return methods, args
    return None, None


# ---------------------------------------------------------------------------------------------------- server
class RestServer:
    """Kafka Connect's REST API for one herder. ``start()`` binds (port 0 picks a free port) and serves on daemon
    threads; ``stop()`` stops accepting and closes the socket; ``url`` is the advertised base URL (ends with "/")."""

    def __init__(self, herder, host, port, advertised_url=None, forward=True, topic_tracking=True,
                 topic_tracking_reset=True, allow_origin="", allow_methods="", max_connections=None):
        self.herder = herder
        self.max_connections = max_connections or MAX_CONNECTIONS
        # CORS (access.control.allow.origin / .methods, Jetty's CrossOriginFilter as Kafka configures it): off
        # when the origin list is empty; "*" allows any origin; methods default to Jetty's GET,POST,HEAD.
        self.allow_origins = [o.strip() for o in (allow_origin or "").split(",") if o.strip()]
        self.allow_methods = [m.strip().upper() for m in (allow_methods or "").split(",") if m.strip()] \
            or ["GET", "POST", "HEAD"]
        self.host = host or ""
        self.port = port
        self._advertised = advertised_url
        self.forward = forward
        self.topic_tracking = topic_tracking              # topic.tracking.enable
        self.topic_tracking_reset = topic_tracking_reset  # topic.tracking.allow.reset
        self.version = kafka_version()
        self.commit = commit_id()
        self._httpd = None
        self._thread = None

    @property
    def url(self):
        if self._advertised:
            return self._advertised if self._advertised.endswith("/") else self._advertised + "/"
        host = self.host or "localhost"
        return "http://%s:%d/" % (host, self.port)

    def start(self):
        server = self

        class Handler(_Handler):
            rest = server

        self._httpd = _HttpServer((self.host, self.port), Handler, self.max_connections)
        self.port = self._httpd.server_address[1]
        if self._advertised and re.search(r":0/?$", self._advertised):
            self._advertised = None          # advertised from a "port 0" config: the bound port instead
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="connect-rest", daemon=True)
        self._thread.start()
        log.info("REST server listening at %s, advertising URL %s", "http://%s:%d/" % (self.host, self.port),
                 self.url)
        return self

    def stop(self):
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        self._httpd = None
        log.info("REST server stopped")

    def location(self, req, path):
        host = req.headers.get("Host")
        base = ("http://%s" % host) if host else self.url.rstrip("/")
        return base + path

    # ------------------------------------------------------------------------------------------------ dispatch
    def handle(self, method, target, raw_body, headers):
        """One request -> Answer. Never raises."""
        split = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        path = split.path
        if "%2f" in path.lower():   # Jetty refuses an encoded "/" in a path (ambiguous separator): 400
            return Answer(400, {"error_code": 400, "message": "Ambiguous URI path separator"})
        segments = [urllib.parse.unquote(s) for s in path.strip("/").split("/")] if path.strip("/") else []
        methods, args = match_route(segments)
        if methods is None:
            return Answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
        entry = methods.get(method)
        if entry is None:
            return Answer(405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"},
                          {"Allow": ", ".join(sorted(methods))})
        func, forwards = entry
        req = Request(self, method, path, query, raw_body, headers, args)
        try:
            return func(req)
        except NotLeaderError as e:
            return self._forward(req, e)
        except RebalanceNeededError as e:
            return self._error(409, STALE_CONFIG_MESSAGE if forwards else str(e))
        except ConnectError as e:
            if e.status >= 500:
                log.error("Uncaught exception in REST call to %s %s", method, path, exc_info=True)
            return self._error(e.status, str(e))
        except NotImplementedError:
            return self._error(500, "This worker does not support %s %s" % (method, path))
        except Exception as e:   # a bug: Kafka's mapper answers 500 with the exception's message
            log.error("Uncaught exception in REST call to %s %s", method, path, exc_info=True)
            return self._error(500, str(e) or type(e).__name__)

    def cors_headers(self, headers, preflight):
        """Headers answering a cross-origin request (none when CORS is off or the origin is not allowed)."""
        origin = headers.get("Origin")
        if not self.allow_origins or not origin:
            return {}
        if "*" not in self.allow_origins and origin not in self.allow_origins:
            return {}
        out = {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}
        if preflight:
            wanted = (headers.get("Access-Control-Request-Method") or "").upper()
            if wanted not in self.allow_methods:
                return {}
            out.update({"Access-Control-Allow-Methods": ",".join(self.allow_methods),
                        "Access-Control-Allow-Headers": "X-Requested-With,Content-Type,Accept,Origin",
                        "Access-Control-Max-Age": "1800"})
        return out

    def options(self, target):
        """OPTIONS (Jersey answers it for every resource): 200 with ``Allow``, 404 for an unknown path."""
        path = urllib.parse.urlsplit(target).path
        segments = [urllib.parse.unquote(s) for s in path.strip("/").split("/")] if path.strip("/") else []
        methods, _ = match_route(segments)
        if methods is None:
            return Answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
        return Answer(200, None, {"Allow": ",".join(sorted(set(methods) | {"OPTIONS"}))})

    @staticmethod
    def _error(status, message):
        return Answer(status, {"error_code": status, "message": message})

    def _forward(self, req, err):
        forward = req.param("forward")
        if not self.forward or (forward is not None and forward.lower() != "true"):
            log.error("Request '%s %s' failed because it couldn't find the target Connect worker within two hops "
                      "(between workers).", req.method, req.path)
            return self._error(409, TWO_HOPS_MESSAGE)
        if not err.leader_url:
            return self._error(409, NO_LEADER_MESSAGE)
        recursive = "true" if forward is None else "false"
        query = [("forward", recursive)] + [(k, v) for k, vs in req.query.items() if k != "forward" for v in vs]
        url = err.leader_url.rstrip("/") + req.path + "?" + urllib.parse.urlencode(query)
        log.debug("Forwarding request %s %s", req.method, url)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if req.headers.get("Authorization"):
            headers["Authorization"] = req.headers["Authorization"]
        fwd = urllib.request.Request(url, data=req.raw_body if req.raw_body else None, method=req.method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(fwd, timeout=FORWARD_TIMEOUT_S) as resp:
                status, body, location = resp.status, resp.read(), resp.headers.get("Location")
        except urllib.error.HTTPError as e:
            status, body, location = e.code, e.read(), None
        except (OSError, ValueError) as e:
            return self._error(500, "IO Error trying to forward REST request: %s" % e)
        extra = {"Location": location} if location else {}
        return Answer(status, None, extra, raw=body)


class _HttpServer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once (Jetty's thread pool under Kafka holds 200):
    a connection beyond that is closed at once, so idle or slow clients cannot pile up threads and memory."""
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address, handler, max_connections):
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            log.warning("REST connection from %s refused: the limit of open connections is reached",
                        client_address[0])
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):   # a client that went away: not worth a stack trace
        log.debug("REST connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kbroker-connect"
    timeout = IDLE_TIMEOUT_S
    rest: RestServer = None

    def _serve(self):
        body, error = self._read_body()
        if error is not None:
            answer = error
            self.close_connection = True
        elif self.command == "OPTIONS":
            answer = self.rest.options(self.path)
        elif self.command == "HEAD":
            answer = self.rest.handle("GET", self.path, body, self.headers)
        else:
            answer = self.rest.handle(self.command, self.path, body, self.headers)
        cors = self.rest.cors_headers(self.headers, preflight=self.command == "OPTIONS")
        if cors:
            answer.headers = dict(answer.headers, **cors)
        self._send(answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _serve

    def _read_body(self):
        """(bytes, None) or (None, Answer) for a body we refuse; bounded by MAX_BODY."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if not length:
            return b"", None
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            return None, Answer(400, {"error_code": 400, "message": "Bad Content-Length: %s" % length})
        if n > MAX_BODY:
            return None, Answer(413, {"error_code": 413, "message": "Request body of %d bytes is over the limit "
                                      "of %d bytes" % (n, MAX_BODY)})
        return self.rfile.read(n), None

    def _read_chunked(self):
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                return None, Answer(400, {"error_code": 400, "message": "Bad chunked request body"})
            if size == 0:
                while self.rfile.readline(1024).strip():   # trailers
                    pass
                return b"".join(parts), None
            total += size
            if total > MAX_BODY:
                return None, Answer(413, {"error_code": 413, "message": "Request body is over the limit of %d "
                                          "bytes" % MAX_BODY})
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _send(self, answer):
        if answer.raw is not None:
            data = answer.raw
        elif answer.body is None:
            data = b""
        else:
            data = _dumps(answer.body)
        self.send_response(answer.status)
        for key, value in answer.headers.items():
            self.send_header(key, value)
        if data or answer.status != 204:
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, fmt, *args):
        # Kafka's request log line ("127.0.0.1 - - [...] "GET /connectors HTTP/1.1" 200 2"), at INFO.
        log.info("%s - %s", self.address_string(), fmt % args)
