"""SCRAM credentials in the coordination backend (kbroker/security/scram_store.py): Kafka's znode format, the
change notification, every broker's cache following it through the ConfigWatcher, and the KIP-554 handlers."""
import json

import gevent
import pytest

from kbroker.coord.embedded import EmbeddedBackend
from kbroker.handlers.scram_credentials import alter_user_scram_credentials, describe_user_scram_credentials
from kbroker.security.sasl.scram import ScramClient, ScramCredential, ScramServer, make_credential, salted_password
from kbroker.security.scram_store import ScramAdmin, ScramStore, write_credentials
from kbroker.topic_admin import ConfigWatcher


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    b.ensure_path("/config/users")
    yield b
    b.stop()


def test_znodes_are_kafkas(backend):
    cred = make_credential("SCRAM-SHA-256", "pw", 8192, salt=b"0123456789abcdef")
    backend.create("/config/users/alice", json.dumps({"version": 1, "config": {"consumer_byte_rate": "100"}}).encode())
    write_credentials(backend, "alice", {"SCRAM-SHA-256": cred})
    data, _ = backend.get("/config/users/alice")
    obj = json.loads(data)
    assert obj == {"version": 1, "config": {"consumer_byte_rate": "100", "SCRAM-SHA-256": cred.to_kafka()}}
    assert obj["config"]["SCRAM-SHA-256"].startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=")
    assert obj["config"]["SCRAM-SHA-256"].endswith(",iterations=8192")
    changes = backend.get_children("/config/changes")
    assert len(changes) == 1 and changes[0].startswith("config_change_")
    assert json.loads(backend.get("/config/changes/" + changes[0])[0]) == {"version": 2,
                                                                         "entity_path": "users/alice"}
    assert write_credentials(backend, "alice", deletes=["SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["SCRAM-SHA-256"]
    assert json.loads(backend.get("/config/users/alice")[0])["config"] == {"consumer_byte_rate": "100"}


def test_cache_follows_notifications(backend):
    store = ScramStore(backend)
    ConfigWatcher(backend, lambda: None, user_changed=store.user_changed).start()
    store.load_all()
    assert store.lookup("bob", "SCRAM-SHA-512") is None
    cred = make_credential("SCRAM-SHA-512", "pw")
    write_credentials(backend, "bob", {"SCRAM-SHA-512": cred})   # as another broker would
    deadline = gevent.Timeout(5)
    deadline.start()
    try:
        while store.lookup("bob", "SCRAM-SHA-512") != cred:
            gevent.sleep(0.01)
        write_credentials(backend, "bob", deletes=["SCRAM-SHA-512"])
        while store.lookup("bob", "SCRAM-SHA-512") is not None:
            gevent.sleep(0.01)
    finally:
        deadline.cancel()
    # a malformed stored credential is ignored, not fatal
    backend.create("/config/users/eve", b'{"version":1,"config":{"SCRAM-SHA-256":"salt=!!"}}')
    store.user_changed("eve")
    assert store.lookup("eve", "SCRAM-SHA-256") is None


class Ctx:
    def __init__(self, scram, allowed=True):
        self.services = type("S", (), {"scram": scram, "authorizer": object() if not allowed else None})()
        self.identity = type("I", (), {"in_process": False})()
        self.allowed = allowed

    def authorize(self, op, rtype, name, log_denied=True):
        return self.allowed


def test_handlers_round_trip_and_authentication(backend):
    store = ScramStore(backend)
    admin = ScramAdmin(backend, store)
    salt = b"s" * 16
    up = {"name": "carol", "mechanism": 2, "iterations": 4096, "salt": salt,
          "salted_password": salted_password("SCRAM-SHA-512", "carol-pw", salt, 4096)}
    assert alter_user_scram_credentials(Ctx(admin), {"deletions": [], "upsertions": [up]}) == {
        "results": [{"user": "carol", "error_code": 0, "error_message": None}]}
    # the credential the broker derived authenticates the password (and only it)
    server = ScramServer("SCRAM-SHA-512", lambda u: store.lookup(u, "SCRAM-SHA-512"))
    client = ScramClient("SCRAM-SHA-512", "carol", "carol-pw")
    client.step(server.step(client.step(server.step(client.first()))))
    assert server.complete and client.complete
    assert describe_user_scram_credentials(Ctx(admin), {"users": None})["results"] == [
        {"user": "carol", "error_code": 0, "error_message": None,
         "credential_infos": [{"mechanism": 2, "iterations": 4096}]}]
    assert isinstance(store.lookup("carol", "SCRAM-SHA-512"), ScramCredential)


def test_handlers_authorization(backend):
    admin = ScramAdmin(backend, ScramStore(backend))
    denied = Ctx(admin, allowed=False)
    resp = alter_user_scram_credentials(denied, {"deletions": [{"name": "x", "mechanism": 1}], "upsertions": []})
    assert resp["results"] == [{"user": "x", "error_code": 31, "error_message": "Cluster authorization failed."}]
    assert describe_user_scram_credentials(denied, {"users": None})["error_code"] == 31
    assert backend.get_children("/config/users") == []


def test_corrupt_user_znode_fails_that_user_only(backend):
    backend.create("/config/users/mangled", b"{not json")
    admin = ScramAdmin(backend, ScramStore(backend))
    up = {"name": "mangled", "mechanism": 1, "iterations": 4096, "salt": b"s", "salted_password": b"p" * 32}
    ok_up = dict(up, name="fine")
    resp = alter_user_scram_credentials(Ctx(admin), {"deletions": [], "upsertions": [up, ok_up]})
    codes = {r["user"]: r["error_code"] for r in resp["results"]}
    assert codes == {"mangled": -1, "fine": 0}
    resp = describe_user_scram_credentials(Ctx(admin), {"users": [{"name": "mangled"}, {"name": "fine"}]})
    assert [(r["user"], r["error_code"]) for r in resp["results"]] == [("mangled", -1), ("fine", 0)]
