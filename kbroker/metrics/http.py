"""The metrics endpoint: a gevent WSGI server on the broker's own event loop (no thread).

* ``GET /metrics`` -- prometheus_client's exposition of the registry (text format 0.0.4, or OpenMetrics when the
  scraper asks for it; gzip when accepted; ``?name[]=`` selects families). The collectors run in this request's
  greenlet: a collector over many partitions yields every 20 ms (``kbroker.timeslice``), so a scrape never holds
  the loop longer.
* ``GET /healthz`` -- 200 ``ok``: the process is up and its event loop serves (a wedged loop cannot answer).
* ``GET /readyz`` -- 200 ``ready`` when ``readiness()`` returns no reasons, else 503 with one reason a line
  ("starting", "not registered", "controller unknown", "partitions loading", "shutting down").
* anything else -- 404.

Both health answers are ``text/plain`` and tiny, for orchestrators' probes (Kubernetes, Docker HEALTHCHECK).
Hostile clients: at most ``MAX_CONNECTIONS`` (32) connections are served at once and one silent for ``IDLE_S``
(10 s) is closed, so the endpoint costs bounded memory and descriptors whatever is sent to it.
"""
import logging

from gevent.pool import Pool
from gevent.pywsgi import WSGIServer
from prometheus_client import make_wsgi_app

log = logging.getLogger(__name__)

_TEXT = [("Content-Type", "text/plain; charset=utf-8")]
# At most this many HTTP connections at once (more wait in the listen backlog), each closed when it sends nothing
# for IDLE_S: a scraper or probe needs one or two, and a client that opens many or never finishes its request
# cannot hold more than these greenlets and file descriptors.
MAX_CONNECTIONS = 32
IDLE_S = 10.0


class _Server(WSGIServer):
    def handle(self, sock, address):
        sock.settimeout(IDLE_S)
        super().handle(sock, address)


class _QuietLog:
    """pywsgi's access log goes nowhere (a scrape every 15 s would fill the broker's log); errors are logged."""

    def write(self, _):
        pass


class MetricsHttpServer:
    def __init__(self, host, port, registry, readiness):
        self.host = host
        self.requested_port = port
        self.readiness = readiness
        self._metrics = make_wsgi_app(registry)
        self._server = None

    @property
    def port(self):
        return self._server.server_port if self._server is not None else None

    def app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return self._metrics(environ, start_response)
        if path == "/healthz":
            start_response("200 OK", _TEXT)
            return [b"ok\n"]
        if path == "/readyz":
            try:
                reasons = list(self.readiness())
            except Exception as e:  # noqa: BLE001 - a failing check is "not ready", never a 500
                log.exception("readiness check failed")
                reasons = ["readiness check failed: %r" % e]
            if not reasons:
                start_response("200 OK", _TEXT)
                return [b"ready\n"]
            start_response("503 Service Unavailable", _TEXT)
            return [("".join("%s\n" % r for r in reasons)).encode()]
        start_response("404 Not Found", _TEXT)
        return [b"not found: /metrics, /healthz, /readyz\n"]

    def start(self):
        self._server = _Server((self.host or "0.0.0.0", self.requested_port), self.app, log=_QuietLog(),
                               error_log=log, spawn=Pool(MAX_CONNECTIONS))
        self._server.start()   # binds now: an error surfaces here, at startup
        return self

    def stop(self):
        if self._server is not None:
            self._server.stop(timeout=1)
            self._server = None
