"""FindCoordinator while the offsets topic is being created: COORDINATOR_NOT_AVAILABLE, never an exception."""
from kbroker import errors
from kbroker.handlers.groups import find_coordinator


class _Coord:
    active = True

    @staticmethod
    def partition_for(group):
        return 7


class _Broker:
    group_coordinator = _Coord()

    def __init__(self, metadata):
        self._metadata = metadata

    def ensure_offsets_topic(self):
        pass

    def topic_metadata(self, name):
        return self._metadata

    def live_brokers(self, listener):
        return []


class _Ctx:
    def __init__(self, broker, version):
        self.broker, self.api_version, self.listener = broker, version, "PLAINTEXT"


def test_offsets_topic_not_yet_in_metadata_cache_answers_coordinator_not_available():
    req = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
    resp = find_coordinator(_Ctx(_Broker(None), 3), req)
    assert resp["error_code"] == errors.COORDINATOR_NOT_AVAILABLE and resp["node_id"] == -1
    resp4 = find_coordinator(_Ctx(_Broker(None), 4), req)
    assert [c["error_code"] for c in resp4["coordinators"]] == [errors.COORDINATOR_NOT_AVAILABLE]
