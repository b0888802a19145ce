"""handlers/common.error_code: KAFKA_STORAGE_ERROR (56) only where the version knows it (KIP-112: Produce v4+,
Fetch v6+); older Produce/Fetch clients get NOT_LEADER_OR_FOLLOWER (6) and refresh metadata; other APIs keep their
answers."""
from kbroker import errors
from kbroker.handlers.common import error_code


def test_offline_partition_storage_error_by_version():
    offline = errors.KafkaStorageError("t-0 is in an offline log dir")
    assert error_code(offline, True, errors.NOT_LEADER_OR_FOLLOWER) == 56
    assert error_code(offline, False, errors.NOT_LEADER_OR_FOLLOWER) == 6
    assert error_code(offline, False) == 56                     # an API that names no older answer: its own code


def test_os_error_by_version():
    disk = OSError(28, "No space left on device")
    assert error_code(disk, True, errors.NOT_LEADER_OR_FOLLOWER) == 56
    assert error_code(disk, False, errors.NOT_LEADER_OR_FOLLOWER) == 6
    assert error_code(disk, False) == errors.UNKNOWN_SERVER_ERROR
    assert error_code(errors.NotLeaderOrFollower("x"), False, errors.NOT_LEADER_OR_FOLLOWER) == 6
