"""kbroker/connect/rest.py against a small in-memory herder: routes, Kafka's status codes and JSON shapes, error
bodies, config coercion, forwarding to the leader on NotLeaderError (and the two-hop limit)."""
import http.client
import json

import pytest

from kbroker.connect.exceptions import (AlreadyExistsError, BadRequestError, NotFoundError, NotLeaderError,
                                        RebalanceNeededError)
from kbroker.connect.herder import Herder
from kbroker.connect.rest import MAX_BODY, RestServer


class FakeHerder(Herder):
    """Connectors in a dict; every call recorded in ``calls``. ``leader_url`` set: writes raise NotLeaderError."""

    def __init__(self):
        self.configs = {}
        self.states = {}
        self.calls = []
        self.leader_url = None
        self.rebalancing = False

    def _write(self, what):
        self.calls.append(what)
        if self.rebalancing:
            raise RebalanceNeededError("Request cannot be completed because a rebalance is expected")
        if self.leader_url is not None:
            raise NotLeaderError("not the leader", self.leader_url)

    def kafka_cluster_id(self):
        return "cluster-xyz"

    def worker_id(self):
        return "127.0.0.1:8083"

    def connectors(self):
        return sorted(self.configs)

    def _need(self, name):
        if name not in self.configs:
            raise NotFoundError("Connector %s not found" % name)

    def connector_info(self, name):
        self._need(name)
        return {"name": name, "config": self.configs[name], "tasks": [{"connector": name, "task": 0}],
                "type": "source"}

    def connector_config(self, name):
        self._need(name)
        return dict(self.configs[name])

    def put_connector_config(self, name, config, allow_replace, target_state=None):
        self._write(("put", name, dict(config), allow_replace, target_state))
        if "connector.class" not in config:
            raise BadRequestError("Connector configuration is invalid and contains the following 1 error(s):\n"
                                  "Missing required configuration \"connector.class\" which has no default value.")
        exists = name in self.configs
        if exists and not allow_replace:
            raise AlreadyExistsError("Connector %s already exists" % name)
        self.configs[name] = dict(config)
        self.states[name] = "RUNNING" if target_state in (None, "STARTED") else target_state
        return not exists, self.connector_info(name)

    def delete_connector(self, name):
        self._write(("delete", name))
        self._need(name)
        del self.configs[name]

    def task_configs(self, name):
        self._need(name)
        return [{"id": {"connector": name, "task": 0}, "config": {"task.class": "x"}}]

    def connector_status(self, name):
        self._need(name)
        return {"name": name, "connector": {"state": self.states[name], "worker_id": "127.0.0.1:8083"},
                "tasks": [{"id": 0, "state": "FAILED", "worker_id": "127.0.0.1:8083", "trace": "boom"},
                          {"id": 1, "state": "RUNNING", "worker_id": "127.0.0.1:8083"}],
                "type": "source"}

    def task_status(self, name, task):
        self._need(name)
        if task != 0:
            raise NotFoundError("No status found for task %s-%d" % (name, task))
        return {"id": 0, "state": "RUNNING", "worker_id": "127.0.0.1:8083"}

    def pause_connector(self, name):
        self._need(name)
        self.states[name] = "PAUSED"

    def resume_connector(self, name):
        self._need(name)
        self.states[name] = "RUNNING"

    def stop_connector(self, name):
        self._write(("stop", name))
        self._need(name)
        self.states[name] = "STOPPED"

    def restart_connector(self, name):
        self._write(("restart", name))
        self._need(name)

    def restart_task(self, name, task):
        self._write(("restart_task", name, task))
        self._need(name)

    def connector_active_topics(self, name):
        return ["a", "b"] if name in self.configs else []

    def reset_connector_active_topics(self, name):
        self.calls.append(("reset_topics", name))

    def alter_connector_offsets(self, name, offsets):
        self._write(("alter_offsets", name, offsets))
        return {"message": "The offsets for this connector have been altered successfully"}

    def connector_plugins(self):
        return [{"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink",
                 "version": "1"}]

    def validate_connector_config(self, plugin, config):
        self.calls.append(("validate", plugin, dict(config)))
        return {"name": config.get("connector.class"), "error_count": 0, "groups": [], "configs": []}


@pytest.fixture
def servers():
    started = []

    def make(herder=None, **kw):
        s = RestServer(herder or FakeHerder(), "127.0.0.1", 0, **kw).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def call(server, method, path, body=None, raw=None, headers=None):
    """(status, parsed JSON or None, headers) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, (json.loads(payload) if payload else None), resp


def test_root_and_unknown_paths(servers):
    s = servers()
    status, body, resp = call(s, "GET", "/")
    assert status == 200 and set(body) == {"version", "commit", "kafka_cluster_id"}
    assert body["kafka_cluster_id"] == "cluster-xyz"
    assert resp.getheader("Content-Type") == "application/json"
    assert call(s, "GET", "/nope")[:2] == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call(s, "DELETE", "/connectors")[:2] == (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
    # a task id that is not an int is an unknown path, as Jersey's Integer path parameter
    assert call(s, "GET", "/connectors/x/tasks/abc/status")[0] == 404
    assert call(s, "GET", "/health")[:2] == (200, {"status": "healthy", "message": "Worker has completed startup "
                                                   "and is ready to handle requests."})


def test_create_read_update_delete(servers):
    herder = FakeHerder()
    s = servers(herder)
    cfg = {"connector.class": "FileStreamSource", "tasks.max": 1, "file": "/tmp/x", "flag": True}
    status, body, resp = call(s, "POST", "/connectors", {"name": "src", "config": cfg})
    assert status == 201
    # numbers and booleans in a config map are their text, as Jackson's Map<String, String>
    assert body == {"name": "src", "config": {"connector.class": "FileStreamSource", "tasks.max": "1",
                                              "file": "/tmp/x", "flag": "true", "name": "src"},
                    "tasks": [{"connector": "src", "task": 0}], "type": "source"}
    assert resp.getheader("Location") == "http://127.0.0.1:%d/connectors/src" % s.port
    assert call(s, "POST", "/connectors", {"name": "src", "config": cfg})[:2] == \
        (409, {"error_code": 409, "message": "Connector src already exists"})
    assert call(s, "GET", "/connectors")[:2] == (200, ["src"])
    assert call(s, "GET", "/connectors/src/config")[1]["tasks.max"] == "1"
    # PUT: 200 for an existing connector, 201 for a new one
    assert call(s, "PUT", "/connectors/src/config", dict(cfg, file="/tmp/y"))[0] == 200
    assert herder.configs["src"]["file"] == "/tmp/y"
    assert call(s, "PUT", "/connectors/other/config", cfg)[0] == 201
    # the name in the config must match the URL's
    status, body, _ = call(s, "PUT", "/connectors/src/config", dict(cfg, name="zzz"))
    assert (status, body["message"]) == (400, "Connector name configuration (zzz) doesn't match connector name in "
                                               "the URL (src)")
    # invalid config: the herder's 400 with Kafka's message
    status, body, _ = call(s, "POST", "/connectors", {"name": "bad", "config": {"tasks.max": "1"}})
    assert status == 400 and body["error_code"] == 400
    assert body["message"].startswith("Connector configuration is invalid and contains the following 1 error(s):")
    # PATCH: merged, null removes
    status, body, _ = call(s, "PATCH", "/connectors/src/config", {"file": "/tmp/z", "flag": None})
    assert status == 200 and body["config"]["file"] == "/tmp/z" and "flag" not in body["config"]
    assert call(s, "DELETE", "/connectors/src")[:2] == (204, None)
    assert call(s, "GET", "/connectors/src")[:2] == (404, {"error_code": 404, "message": "Connector src not found"})
    assert call(s, "DELETE", "/connectors/src")[0] == 404


def test_delete_answers_204_without_body(servers):
    s = servers()
    call(s, "POST", "/connectors", {"name": "c", "config": {"connector.class": "X"}})
    status, body, resp = call(s, "DELETE", "/connectors/c")
    assert (status, body) == (204, None)


def test_status_tasks_expand_and_actions(servers):
    herder = FakeHerder()
    s = servers(herder)
    call(s, "POST", "/connectors", {"name": "c", "config": {"connector.class": "X"}})
    status, body, _ = call(s, "GET", "/connectors/c/status")
    assert status == 200 and body["connector"] == {"state": "RUNNING", "worker_id": "127.0.0.1:8083"}
    assert call(s, "GET", "/connectors/c/tasks")[1] == [{"id": {"connector": "c", "task": 0},
                                                         "config": {"task.class": "x"}}]
    assert call(s, "GET", "/connectors/c/tasks-config")[0] == 404     # removed in Kafka 4
    assert call(s, "GET", "/connectors/c/tasks/0/status")[1]["state"] == "RUNNING"
    assert call(s, "GET", "/connectors/c/tasks/7/status")[:2] == \
        (404, {"error_code": 404, "message": "No status found for task c-7"})
    status, body, _ = call(s, "GET", "/connectors?expand=status&expand=info")
    assert status == 200 and set(body) == {"c"} and set(body["c"]) == {"status", "info"}
    assert call(s, "PUT", "/connectors/c/pause")[:2] == (202, None)
    assert herder.states["c"] == "PAUSED"
    assert call(s, "PUT", "/connectors/c/resume")[:2] == (202, None)
    assert herder.states["c"] == "RUNNING"
    assert call(s, "PUT", "/connectors/nope/pause")[0] == 404
    assert call(s, "PUT", "/connectors/c/stop")[:2] == (204, None)
    assert call(s, "POST", "/connectors/c/restart")[:2] == (204, None)
    assert call(s, "POST", "/connectors/c/tasks/0/restart")[:2] == (204, None)
    assert ("restart_task", "c", 0) in herder.calls
    # KIP-745: onlyFailed + includeTasks restarts the FAILED task only and answers 202 with RESTARTING marks
    herder.calls.clear()
    status, body, _ = call(s, "POST", "/connectors/c/restart?includeTasks=true&onlyFailed=true")
    assert status == 202
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING", "RUNNING"]
    assert body["connector"]["state"] == "STOPPED"   # not FAILED: not restarted
    assert [c for c in herder.calls if c[0].startswith("restart")] == [("restart_task", "c", 0)]
    assert call(s, "GET", "/connectors/c/topics")[:2] == (200, {"c": {"topics": ["a", "b"]}})
    assert call(s, "PUT", "/connectors/c/topics/reset")[:2] == (202, None)


def test_topic_tracking_disabled(servers):
    s = servers(topic_tracking=False)
    assert call(s, "GET", "/connectors/c/topics")[:2] == (403, {"error_code": 403,
                                                                "message": "Topic tracking is disabled."})
    s2 = servers(topic_tracking_reset=False)
    assert call(s2, "PUT", "/connectors/c/topics/reset")[1]["message"] == "Topic tracking reset is disabled."


def test_plugins_and_validate(servers):
    herder = FakeHerder()
    s = servers(herder)
    assert call(s, "GET", "/connector-plugins")[1][0]["type"] == "sink"
    status, body, _ = call(s, "PUT", "/connector-plugins/FileStreamSinkConnector/config/validate",
                           {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector"})
    assert status == 200 and body["error_count"] == 0
    status, body, _ = call(s, "PUT", "/connector-plugins/FileStreamSink/config/validate",
                           {"connector.class": "FileStreamSource"})
    assert (status, body["message"]) == (400, "Included connector type FileStreamSource does not match request "
                                              "type FileStreamSink")


def test_bad_bodies(servers):
    s = servers()
    status, body, _ = call(s, "POST", "/connectors", raw=b"{not json")
    assert status == 500 and body["error_code"] == 500
    status, body, _ = call(s, "PUT", "/connectors/c/config", {"a": {"nested": 1}})
    assert status == 500 and "java.lang.String" in body["message"]
    # Kafka answers 500 for a missing body, a missing config and an unknown initial_state (Jackson / null)
    assert call(s, "POST", "/connectors", raw=b"")[0] == 500
    assert call(s, "POST", "/connectors", {"name": "x"})[0] == 500
    assert call(s, "POST", "/connectors", {"name": "x", "config": {"connector.class": "X"},
                                           "initial_state": "bogus"})[0] == 500
    status, _, resp = call(s, "POST", "/connectors", {"name": "y", "config": {"connector.class": "X"},
                                                      "initial_state": "paused"})
    assert status == 201
    # Jetty refuses an encoded "/" in a path
    assert call(s, "DELETE", "/connectors/a%2Fb")[0] == 400
    # HEAD answers as GET without a body
    status, body, resp = call(s, "HEAD", "/connectors")
    assert (status, body, resp.getheader("Content-Length")) == (200, None, str(len(b'["y"]')))
    status, body, _ = call(s, "POST", "/connectors", raw=b"x", headers={"Content-Length": str(MAX_BODY + 1)})
    assert status == 413


def test_forwarding_to_the_leader(servers):
    leader_herder = FakeHerder()
    leader = servers(leader_herder)
    follower_herder = FakeHerder()
    follower_herder.leader_url = leader.url
    follower = servers(follower_herder)
    status, body, resp = call(follower, "POST", "/connectors", {"name": "f", "config": {"connector.class": "X"}})
    assert status == 201 and body["name"] == "f"
    assert "f" in leader_herder.configs and "f" not in follower_herder.configs
    assert resp.getheader("Location").endswith("/connectors/f")
    # an error of the leader comes back as it is
    assert call(follower, "POST", "/connectors", {"name": "f", "config": {"connector.class": "X"}})[:2] == \
        (409, {"error_code": 409, "message": "Connector f already exists"})
    # the query parameters go along (restart with includeTasks: the follower knows the config, the leader acts)
    follower_herder.configs["f"] = leader_herder.configs["f"]
    follower_herder.states["f"] = "RUNNING"
    assert call(follower, "POST", "/connectors/f/restart?includeTasks=true")[0] == 202
    assert call(follower, "DELETE", "/connectors/f")[0] == 204
    assert "f" not in leader_herder.configs
    # a worker that thinks the follower leads: forward=true -> one more hop with forward=false -> 409
    leader_herder.leader_url = follower.url
    status, body, _ = call(follower, "POST", "/connectors", {"name": "g", "config": {"connector.class": "X"}})
    assert (status, body["message"]) == (409, "Cannot complete request because of a conflicting operation (e.g. "
                                              "worker rebalance)")
    # no known leader -> 409
    follower_herder.leader_url = ""
    status, body, _ = call(follower, "DELETE", "/connectors/f")
    assert status == 409 and "no known leader URL" in body["message"]


def test_rebalance_is_409(servers):
    herder = FakeHerder()
    herder.rebalancing = True
    s = servers(herder)
    status, body, _ = call(s, "POST", "/connectors", {"name": "c", "config": {"connector.class": "X"}})
    assert (status, body["error_code"]) == (409, 409)
    assert body["message"].startswith("Cannot complete request momentarily due to stale configuration")


def test_leader_unreachable_is_500(servers):
    herder = FakeHerder()
    herder.leader_url = "http://127.0.0.1:1/"
    s = servers(herder)
    status, body, _ = call(s, "POST", "/connectors", {"name": "c", "config": {"connector.class": "X"}})
    assert status == 500 and body["message"].startswith("IO Error trying to forward REST request")


def test_keep_alive_serves_several_requests_on_one_connection(servers):
    s = servers()
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/connectors")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"[]")
    conn.request("PUT", "/connectors/none/pause")
    resp = conn.getresponse()
    assert resp.status == 404 and json.loads(resp.read())["error_code"] == 404
    conn.close()


def test_cors_and_options(servers):
    s = servers(allow_origin="http://ui.example", allow_methods="GET,PUT")
    status, _, resp = call(s, "GET", "/connectors", headers={"Origin": "http://ui.example"})
    assert status == 200 and resp.getheader("Access-Control-Allow-Origin") == "http://ui.example"
    status, _, resp = call(s, "GET", "/connectors", headers={"Origin": "http://evil.example"})
    assert status == 200 and resp.getheader("Access-Control-Allow-Origin") is None
    status, _, resp = call(s, "OPTIONS", "/connectors/x/config",
                           headers={"Origin": "http://ui.example", "Access-Control-Request-Method": "PUT"})
    assert status == 200 and resp.getheader("Allow") == "GET,OPTIONS,PATCH,PUT"
    assert resp.getheader("Access-Control-Allow-Methods") == "GET,PUT"
    # a method not allowed: no CORS headers on the preflight
    status, _, resp = call(s, "OPTIONS", "/connectors", headers={"Origin": "http://ui.example",
                                                                 "Access-Control-Request-Method": "DELETE"})
    assert status == 200 and resp.getheader("Access-Control-Allow-Origin") is None
    # CORS off (the default): no headers
    plain = servers()
    assert call(plain, "GET", "/", headers={"Origin": "http://ui.example"})[2].getheader(
        "Access-Control-Allow-Origin") is None
    assert call(plain, "OPTIONS", "/nope")[0] == 404


def test_alter_offsets_keeps_json_numbers(servers):
    herder = FakeHerder()
    s = servers(herder)
    body = {"offsets": [{"partition": {"filename": "f"}, "offset": {"position": 12}}]}
    assert call(s, "PATCH", "/connectors/c/offsets", body)[:2] == \
        (200, {"message": "The offsets for this connector have been altered successfully"})
    assert herder.calls[-1] == ("alter_offsets", "c", body["offsets"])     # 12 stays an int
    assert call(s, "PATCH", "/connectors/c/offsets", {"offsets": []})[:2] == \
        (400, {"error_code": 400, "message": "Partitions / offsets need to be provided for an alter offsets request"})
    # a herder without the offsets endpoints (FakeHerder has no reset): 500 naming the request
    status, body, _ = call(s, "DELETE", "/connectors/c/offsets")
    assert status == 500 and body["message"] == "This worker does not support DELETE /connectors/c/offsets"


def test_connections_are_bounded(servers):
    import socket
    s = servers(max_connections=2)
    held = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(2)]
    try:
        # both slots are taken by idle connections: a third is closed without an answer
        def third_is_closed():
            extra = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            try:
                extra.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                return extra.recv(100) == b""
            except ConnectionResetError:
                return True
            finally:
                extra.close()
        assert third_is_closed()
    finally:
        for c in held:
            c.close()
    # the slots come back when the connections close (their threads see EOF): bounded retry
    import time
    deadline = time.monotonic() + 5
    while True:
        try:
            if call(s, "GET", "/connectors")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the connection slots did not come back"
        time.sleep(0.05)
