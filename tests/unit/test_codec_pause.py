"""The codec hands the event loop back while it decodes or encodes a long array (issue 8): ``pause`` is called every
PAUSE_EVERY elements of an array longer than that, never for shorter ones, and a pause during which another
message is decoded leaves the element budget of the first intact."""
import struct

import pytest

from kbroker.protocol import schema
from kbroker.protocol.apis import APIS
from kbroker.protocol.schema import PAUSE_EVERY, ElementLimitError

DESCRIBE_GROUPS = APIS[15]


def describe_groups_v0(names):
    return struct.pack(">i", len(names)) + b"".join(struct.pack(">h", len(n)) + n for n in names)


def test_decoding_a_long_array_pauses_every_pause_every_elements():
    calls = []
    n = 3 * PAUSE_EVERY + 5
    req = DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"g%d" % i for i in range(n)]), 0, 100_000,
                                         pause=lambda: calls.append(1))
    assert len(req["groups"]) == n and req["groups"][-1] == "g%d" % (n - 1)
    assert len(calls) == 3


def test_short_arrays_and_no_pause_never_pause():
    calls = []
    buf = describe_groups_v0([b"g"] * PAUSE_EVERY)
    assert len(DESCRIBE_GROUPS.decode_request(0, buf, 0, 100_000, pause=lambda: calls.append(1))["groups"]) == \
        PAUSE_EVERY
    assert calls == []
    assert len(DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"g"] * 5000))["groups"]) == 5000


def test_encoding_a_long_response_array_pauses_and_writes_the_same_bytes():
    groups = [{"error_code": 0, "group_id": "g%d" % i, "group_state": "Dead", "protocol_type": "",
               "protocol_data": "", "members": []} for i in range(2 * PAUSE_EVERY + 1)]
    calls = []
    paused = DESCRIBE_GROUPS.encode_response(0, {"groups": groups}, pause=lambda: calls.append(1)).getvalue()
    assert len(calls) == 2
    assert paused == DESCRIBE_GROUPS.encode_response(0, {"groups": groups}).getvalue()


def test_a_decode_during_a_pause_leaves_the_element_budget_of_the_paused_one_intact():
    """The budget is per thread (per greenlet once gevent patches threading): a pause saves and restores it, so a
    greenlet that decodes meanwhile cannot widen or narrow the paused decode's allowance."""
    inner = []

    def pause():
        # Another request, decoded while the first one is paused, with a far smaller allowance it exhausts.
        with pytest.raises(ElementLimitError):
            DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"x"] * 10), 0, 5)
        inner.append(DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"y"] * 3), 0, 100_000))

    n = 2 * PAUSE_EVERY
    req = DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"g"] * n), 0, n, pause=pause)
    assert len(req["groups"]) == n and len(inner) == 1
    with pytest.raises(ElementLimitError):     # the limit still holds across pauses: one element more is refused
        DESCRIBE_GROUPS.decode_request(0, describe_groups_v0([b"g"] * (n + 1)), 0, n, pause=pause)


OFFSET_COMMIT = APIS[8]


def offset_commit_v2(n_topics):
    """OffsetCommit v2 naming ``n_topics`` topics of one partition each: the topics array is long, and every topic's
    partitions array is charged to the budget while the topics array is being decoded."""
    def s(b):
        return struct.pack(">h", len(b)) + b
    topic = lambda i: s(b"t%d" % i) + struct.pack(">i", 1) + struct.pack(">iq", 0, 5) + s(b"")
    return (s(b"g") + struct.pack(">i", -1) + s(b"") + struct.pack(">q", -1) + struct.pack(">i", n_topics)
            + b"".join(topic(i) for i in range(n_topics)))


def needed_elements(buf):
    """The smallest max_elements a message decodes with."""
    lo, hi = 1, 1 << 20
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            OFFSET_COMMIT.decode_request(2, buf, 0, mid)
            hi = mid
        except ElementLimitError:
            lo = mid + 1
    return lo


def test_two_greenlets_decoding_in_turns_keep_their_own_budgets():
    """Without monkey-patching the budget is one per thread, shared by greenlets: each pause must put back what
    the paused decode had, or a greenlet that resumed would go on with another's budget (here: B's too small limit
    would be lost, and B would decode what it must refuse)."""
    import gevent

    a_buf, b_buf = offset_commit_v2(3 * PAUSE_EVERY), offset_commit_v2(3 * PAUSE_EVERY + 100)
    a_limit, b_limit = needed_elements(a_buf), needed_elements(b_buf) - 1
    turns = []

    def decode(name, buf, limit):
        try:
            return len(OFFSET_COMMIT.decode_request(2, buf, 0, limit,
                                                    pause=lambda: (turns.append(name), gevent.sleep(0)))["topics"])
        except ElementLimitError:
            return "refused"
    a = gevent.spawn(decode, "a", a_buf, a_limit)
    b = gevent.spawn(decode, "b", b_buf, b_limit)
    gevent.joinall([a, b])
    assert "a" in turns and "b" in turns and turns[:2] == ["a", "b"]     # they really ran in turns
    assert (a.value, b.value) == (3 * PAUSE_EVERY, "refused")
    # ... and neither left its values behind for the next decode of this thread.
    assert (schema._budget.left, schema._budget.limit, schema._budget.pause) == (
        schema.UNLIMITED, schema.UNLIMITED, None)
