"""Small helpers shared by handlers: mapping exceptions to error codes without hiding bugs; a time-slice yielder for
loops over a request's elements (issue 8: no request may hold the event loop for more than ~100 ms)."""
import logging

from kbroker import errors
from kbroker.timeslice import TimeSlice

log = logging.getLogger("kbroker.handlers")


def error_code(exc, version_supports_storage_error=True, older=None):
    """The wire code for an exception raised while serving one partition.

    KafkaError subclasses carry their own code. An OSError is a disk problem: KAFKA_STORAGE_ERROR (56) where the
    API version knows it (KIP-112 bumped Produce to v4 and Fetch to v6 for it), else ``older``: Produce and Fetch
    pass NOT_LEADER_OR_FOLLOWER (6), as KIP-112 answers older clients -- they refresh metadata and find the leader
    the controller elects elsewhere once the dir is offline, where an unknown 56 would be fatal to them (an offline
    partition's KafkaStorageError included); other APIs pass none: an OSError answers UNKNOWN_SERVER_ERROR (-1) and
    a KafkaError its own code. Anything else is a bug: logged with its traceback and
    answered with UNKNOWN_SERVER_ERROR so one bad partition does not take the connection down.
    """
    if isinstance(exc, errors.KafkaError):
        if exc.code == errors.KAFKA_STORAGE_ERROR and not version_supports_storage_error and older is not None:
            return older
        return exc.code
    if isinstance(exc, OSError):
        log.error("storage error: %s", exc)
        if version_supports_storage_error:
            return errors.KAFKA_STORAGE_ERROR
        return errors.UNKNOWN_SERVER_ERROR if older is None else older
    log.exception("unexpected error while handling a request", exc_info=exc)
    return errors.UNKNOWN_SERVER_ERROR


def record_failure(result, exc, version_supports_storage_error=False):
    """Set ``error_code`` and ``error_message`` of one per-resource result dict from an exception."""
    result["error_code"] = error_code(exc, version_supports_storage_error)
    result["error_message"] = getattr(exc, "message", None) or str(exc)


def sliced(items):
    """Iterate ``items`` (a request's elements: up to request.max.elements = 100,000) handing the event loop back
    whenever the caller's work between two items has held it for a time slice (20 ms, ``kbroker/timeslice.py``), so
    other connections are served while a large request is. For handlers' per-element loops; ~0.2 us per item."""
    slice_ = TimeSlice()
    tick = slice_.tick
    for item in items:
        yield item
        tick()
