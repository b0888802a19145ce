"""kbroker/quota/store.py: Kafka's znode layout for client quotas, the 8-level precedence, <default> entities, the
static defaults, change notifications and the SCRAM keys kept in the same user znode."""
import json

import gevent

import pytest

from kbroker.coord.embedded import EmbeddedBackend
from kbroker.quota import store
from kbroker.quota.store import CONSUMER, PRODUCER, REQUEST, QuotaLimits


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path / "coord")).start()
    yield b
    b.stop()


def _put(backend, path, config):
    data = json.dumps({"version": 1, "config": config}).encode()
    if backend.exists(path) is None:
        backend.create(path, data, makepath=True)
    else:
        backend.set(path, data)


def _clear(backend, path):
    _put(backend, path, {})


def test_sanitize_as_kafka():
    assert store.sanitize("alice") == "alice"
    assert store.sanitize("user@x.com") == "user%40x.com"
    assert store.sanitize("a b*c~d+e") == "a%20b%2Ac%7Ed%2Be"
    assert store.sanitize("<default>") == "%3Cdefault%3E"
    assert store.sanitize("Ω") == "%CE%A9"
    for name in ("a b*c~d+e", "<default>", "Ω", "x/y"):
        assert store.desanitize(store.sanitize(name)) == name


def test_entity_paths():
    assert store.entity_path(False, "slow") == "/config/clients/slow"
    assert store.entity_path(False, None) == "/config/clients/<default>"
    assert store.entity_path("u@x", False) == "/config/users/u%40x"
    assert store.entity_path(None, "c") == "/config/users/<default>/clients/c"
    assert store.entity_path("u", None) == "/config/users/u/clients/<default>"
    assert store.parse_entity_path("users/u%40x/clients/<default>") == ("u@x", None)
    assert store.parse_entity_path("clients/%3Cdefault%3E") == (False, "<default>")
    assert store.parse_entity_path("users/<default>") == (None, False)
    assert store.parse_entity_path("topics/t") is None
    assert store.parse_entity_path("users/u/clients") is None
    with pytest.raises(ValueError):
        store.entity_path()


# The 8 levels, most specific first; each one's value is its level number x 1000.
LEVELS = [
    ("/config/users/alice/clients/app", ("alice", "app")),
    ("/config/users/alice/clients/<default>", ("alice", "app")),
    ("/config/users/alice", ("alice", "")),
    ("/config/users/<default>/clients/app", ("alice", "app")),
    ("/config/users/<default>/clients/<default>", ("alice", "app")),
    ("/config/users/<default>", ("alice", "")),
    ("/config/clients/app", ("", "app")),
    ("/config/clients/<default>", ("", "app")),
]


def test_precedence_of_the_eight_levels(backend):
    for level, (path, _) in enumerate(LEVELS, 1):
        _put(backend, path, {PRODUCER: str(level * 1000)})
    limits = QuotaLimits(backend).load_all()
    # Remove the levels one by one from the most specific: each time the next one answers.
    for level, (path, key) in enumerate(LEVELS, 1):
        assert limits.limit_for(PRODUCER, "alice", "app") == (key, level * 1000.0), path
        _clear(backend, path)
        limits.entity_changed(path[len("/config/"):])
    assert limits.limit_for(PRODUCER, "alice", "app") == (("", "app"), None)
    assert not limits.has_quotas(PRODUCER)


def test_each_level_alone_and_other_principals(backend):
    for level, (path, key) in enumerate(LEVELS, 1):
        _put(backend, path, {CONSUMER: "5"})
        limits = QuotaLimits(backend).load_all()
        assert limits.limit_for(CONSUMER, "alice", "app") == (key, 5.0), path
        # Another user / client: only the <default> parts of the level apply to them.
        applies_to_bob = "/users/alice" not in path
        applies_to_other_client = "/clients/app" not in path
        assert limits.limit_for(CONSUMER, "bob", "app")[1] == (5.0 if applies_to_bob else None), path
        assert limits.limit_for(CONSUMER, "alice", "other")[1] == (5.0 if applies_to_other_client else None), path
        assert limits.limit_for(PRODUCER, "alice", "app") == (("", "app"), None)
        _clear(backend, path)


def test_kinds_are_independent_and_values_are_doubles(backend):
    _put(backend, "/config/clients/app", {PRODUCER: "1048576.0", REQUEST: "12.5", "SCRAM-SHA-256": "x"})
    _put(backend, "/config/users/alice", {CONSUMER: "100"})
    limits = QuotaLimits(backend).load_all()
    assert limits.limit_for(PRODUCER, "alice", "app") == (("", "app"), 1048576.0)
    assert limits.limit_for(REQUEST, "alice", "app") == (("", "app"), 12.5)
    assert limits.limit_for(CONSUMER, "alice", "app") == (("alice", ""), 100.0)
    assert limits.limit_for(CONSUMER, "bob", "app") == (("", "app"), None)


def test_sanitized_names_are_matched_and_literal_default_is_not_the_default(backend):
    _put(backend, "/config/users/u%40x.com", {PRODUCER: "7"})
    _put(backend, "/config/clients/%3Cdefault%3E", {PRODUCER: "9"})
    limits = QuotaLimits(backend).load_all()
    assert limits.limit_for(PRODUCER, "u@x.com", "c") == (("u@x.com", ""), 7.0)
    assert limits.limit_for(PRODUCER, "other", "c") == (("", "c"), None)
    assert limits.limit_for(PRODUCER, "other", "<default>") == (("", "<default>"), 9.0)


def test_static_default_is_the_lowest_precedence(backend):
    limits = QuotaLimits(backend, static={PRODUCER: 2048.0}).load_all()
    assert limits.limit_for(PRODUCER, "alice", "app") == (("", "app"), 2048.0)
    assert limits.limit_for(CONSUMER, "alice", "app") == (("", "app"), None)
    _put(backend, "/config/clients/<default>", {PRODUCER: "10"})
    limits.entity_changed("clients/<default>")
    assert limits.limit_for(PRODUCER, "alice", "app") == (("", "app"), 10.0)


def test_unparsable_values_and_znodes_are_left_out(backend):
    _put(backend, "/config/clients/a", {PRODUCER: "fast", CONSUMER: "3"})
    backend.create("/config/clients/b", b"{not json", makepath=True)
    limits = QuotaLimits(backend).load_all()
    assert limits.limit_for(PRODUCER, "", "a") == (("", "a"), None)
    assert limits.limit_for(CONSUMER, "", "a") == (("", "a"), 3.0)
    assert limits.limit_for(CONSUMER, "", "b") == (("", "b"), None)
    limits.entity_changed("clients/b")      # a notification for a corrupt znode changes nothing, raises nothing
    assert limits.entities() == {(False, "a"): {CONSUMER: 3.0}}


def test_write_entity_keeps_scram_keys_and_notifies(backend):
    _put(backend, "/config/users/alice", {"SCRAM-SHA-256": "salt=abc"})
    assert store.write_entity(backend, "alice", False, {PRODUCER: 1048576}) == {PRODUCER: 1048576.0}
    data, _ = backend.get("/config/users/alice")
    assert json.loads(data) == {"version": 1, "config": {"SCRAM-SHA-256": "salt=abc",
                                                         PRODUCER: "1048576"}}
    store.write_entity(backend, "alice", False, {REQUEST: 50})
    assert json.loads(backend.get("/config/users/alice")[0])["config"][REQUEST] == "50.0"
    changes = backend.get_children("/config/changes")
    assert len(changes) == 2
    assert json.loads(backend.get("/config/changes/" + changes[0])[0]) == {"version": 2,
                                                                           "entity_path": "users/alice"}
    assert store.write_entity(backend, "alice", False, deletes=[PRODUCER, REQUEST]) == {}
    assert json.loads(backend.get("/config/users/alice")[0])["config"] == {"SCRAM-SHA-256": "salt=abc"}
    # An entity left with no key keeps an empty config (as Kafka); a sanitized user's <default> client.
    store.write_entity(backend, "a b", None, {CONSUMER: 5})
    assert backend.get_children("/config/users/a%20b/clients") == ["<default>"]
    store.write_entity(backend, "a b", None, deletes=[CONSUMER])
    assert json.loads(backend.get("/config/users/a%20b/clients/<default>")[0]) == {"version": 1, "config": {}}
    assert [json.loads(backend.get("/config/changes/" + c)[0])["entity_path"]
            for c in backend.get_children("/config/changes")] == [
        "users/alice", "users/alice", "users/alice", "users/a%20b/clients/<default>", "users/a%20b/clients/<default>"]


def test_all_entities_lists_every_level(backend):
    for level, (path, _) in enumerate(LEVELS, 1):
        _put(backend, path, {PRODUCER: str(level)})
    _put(backend, "/config/users/scram-only", {"SCRAM-SHA-512": "x"})
    got = dict(store.all_entities(backend))
    assert got == {("alice", "app"): {PRODUCER: 1.0}, ("alice", None): {PRODUCER: 2.0},
                   ("alice", False): {PRODUCER: 3.0}, (None, "app"): {PRODUCER: 4.0},
                   (None, None): {PRODUCER: 5.0}, (None, False): {PRODUCER: 6.0},
                   (False, "app"): {PRODUCER: 7.0}, (False, None): {PRODUCER: 8.0}}


def _until(cond, timeout=5):
    with gevent.Timeout(timeout):
        while not cond():
            gevent.sleep(0.01)


def test_watcher_applies_notifications_and_keeps_scram_working(backend):
    from kbroker.security.scram_store import ScramStore, write_credentials
    from kbroker.security.sasl.scram import make_credential
    from kbroker.topic_admin import ConfigWatcher
    scram = ScramStore(backend)
    limits = QuotaLimits(backend)
    ConfigWatcher(backend, lambda: None, user_changed=scram.user_changed,
                  entity_changed=limits.entity_changed).start()
    scram.load_all()
    limits.load_all()
    store.write_entity(backend, False, "slow", {PRODUCER: 1048576})           # as another broker would
    _until(lambda: limits.limit_for(PRODUCER, "u", "slow")[1] == 1048576.0)
    store.write_entity(backend, "u", None, {CONSUMER: 10})
    _until(lambda: limits.limit_for(CONSUMER, "u", "any") == (("u", "any"), 10.0))
    cred = make_credential("SCRAM-SHA-256", "pw")
    write_credentials(backend, "u", {"SCRAM-SHA-256": cred})
    store.write_entity(backend, "u", False, {REQUEST: 50})
    _until(lambda: limits.limit_for(REQUEST, "u", "c") == (("u", ""), 50.0))
    _until(lambda: scram.lookup("u", "SCRAM-SHA-256") == cred)
    store.write_entity(backend, False, "slow", deletes=[PRODUCER])
    _until(lambda: limits.limit_for(PRODUCER, "u", "slow")[1] is None)
    assert not limits.has_quotas(PRODUCER)
    assert scram.lookup("u", "SCRAM-SHA-256") == cred


def test_static_defaults_from_the_broker_config():
    from kbroker.broker import static_quotas
    from kbroker.config import BrokerConfig
    assert static_quotas(BrokerConfig.from_sources(None, [])) == {}
    cfg = BrokerConfig.from_sources(None, ["quota.producer.default=1048576", "quota.consumer.default=2048"])
    assert static_quotas(cfg) == {PRODUCER: 1048576.0, CONSUMER: 2048.0}
