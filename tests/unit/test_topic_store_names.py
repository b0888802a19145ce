"""TopicStore never turns an illegal topic name into a znode path.

A name with '/' used to reach other znodes: DeleteTopics of "t/partitions" found ``/brokers/topics/t/partitions``
(topic t's partitions znode), answered 0 and deleted topic t; AlterConfigs wrote ``/config/topics/t/partitions``.
An illegal name names no topic: ``exists`` is False and ``assignment`` raises UNKNOWN_TOPIC_OR_PARTITION (3).
"""
import pytest

from kbroker import errors
from kbroker.coord import EmbeddedBackend
from kbroker.coord.metadata_store import TopicStore

ILLEGAL = ["t/partitions", "t/partitions/0", "t/partitions/0/state", "", ".", "..", "../t", "t" * 250, "a b"]


@pytest.fixture
def store(tmp_path):
    backend = EmbeddedBackend(str(tmp_path)).start()
    s = TopicStore(backend)
    s.create_topic("t", {0: [0], 1: [0]})
    backend.ensure_path("/brokers/topics/t/partitions/0/state")
    yield s
    backend.stop()


@pytest.mark.parametrize("name", ILLEGAL)
def test_illegal_names_name_no_topic(store, name):
    assert store.exists(name) is False
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.assignment(name)
    with pytest.raises(errors.UnknownTopicOrPartition):
        store.set_topic_config(name, {"retention.ms": "5"})
    assert store.exists("t") and store.assignment("t") == {0: [0], 1: [0]}
    assert not store.backend.exists("/config/topics/t/partitions")


def test_legal_names_still_found(store):
    store.create_topic("a.b_c-9", {0: [0]})
    assert store.exists("a.b_c-9") and store.assignment("a.b_c-9") == {0: [0]}
    assert not store.exists("missing")
