"""FindCoordinator while the offsets topic is being created: COORDINATOR_NOT_AVAILABLE, never an exception."""
from kbroker import errors
from kbroker.handlers.groups import find_coordinator
from kbroker.server.metadata_cache import MetadataCache
from tests.unit.ctx import make_ctx


class _Coord:
    active = True

    @staticmethod
    def partition_for(group):
        return 7


class _Topics:
    """The topic-admin collaborator: the offsets topic's creation was started, not yet seen by the cache."""

    def __init__(self):
        self.ensured = 0

    def ensure_offsets_topic(self):
        self.ensured += 1


def test_offsets_topic_not_yet_in_metadata_cache_answers_coordinator_not_available():
    req = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
    topics = _Topics()
    services = dict(groups=_Coord(), topics=topics, metadata=MetadataCache())   # an empty cache: no partition 7
    resp = find_coordinator(make_ctx(3, **services), req)
    assert resp["error_code"] == errors.COORDINATOR_NOT_AVAILABLE and resp["node_id"] == -1
    resp4 = find_coordinator(make_ctx(4, **services), req)
    assert [c["error_code"] for c in resp4["coordinators"]] == [errors.COORDINATOR_NOT_AVAILABLE]
    assert topics.ensured == 2
