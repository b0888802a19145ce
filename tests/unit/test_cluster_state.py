"""The frozen partition-state values (kbroker/cluster_state.py): immutability, and the only two conversions to and
from dicts -- the LeaderAndIsr codec (every version the cluster handler serves) and the state znode's decoded value."""
import dataclasses

import pytest

from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.coord.znodes import TopicPartitionStateZNode
from kbroker.handlers.cluster import leader_and_isr_states
from kbroker.protocol.apis import APIS

LAI = APIS[4]


def test_values_are_frozen_tuples():
    la = LeaderAndIsr(1, 2, [1, 2], 3, 4)
    assert la.isr == (1, 2) and type(la.isr) is tuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        la.leader = 2
    st = PartitionLeadership("t", 0, la, [1, 2], [2], [3])
    assert (st.replicas, st.adding_replicas, st.removing_replicas, st.is_new, st.tp) == ((1, 2), (2,), (3,), False,
                                                                                          ("t", 0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.replicas = (9,)
    # Equal values are one value: a set holds it once, whatever sequence type it was built from.
    assert len({st, PartitionLeadership("t", 0, LeaderAndIsr(1, 2, (1, 2), 3, 4), (1, 2), (2,), (3,))}) == 1


def test_from_the_state_znode():
    raw = TopicPartitionStateZNode.encode(leader=2, leader_epoch=7, isr=[2, 3], controller_epoch=5)
    assert LeaderAndIsr.of(TopicPartitionStateZNode.decode(raw, 11)) == LeaderAndIsr(2, 7, (2, 3), 5, 11)


def _request(version, states):
    if version <= 1:
        body = {"controller_id": 1, "controller_epoch": 5,
                "ungrouped_partition_states": [dict(s.to_wire(), topic_name=s.topic) for s in states]}
    else:
        by_topic = {}
        for s in states:
            by_topic.setdefault(s.topic, []).append(s.to_wire())
        body = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 9,
                "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()]}
    body["live_leaders"] = []
    return LAI.decode_request(version, LAI.encode_request(version, body).getvalue())


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_codec_round_trip(version):
    states = [PartitionLeadership("t", 3, LeaderAndIsr(2, 7, (2, 1), 5, 11), (1, 2, 4), (4,), (1,), True),
              PartitionLeadership("t", 0, LeaderAndIsr(-1, 1, (3,), 4, 0), (3, 1)),
              PartitionLeadership("u", 1, LeaderAndIsr(1, 0, (1,), 5, 0), (1,), is_new=True)]
    got = leader_and_isr_states(_request(version, states), version)
    # Fields a version lacks decode empty: adding/removing before v3, is_new before v1.
    want = [dataclasses.replace(s, adding_replicas=s.adding_replicas if version >= 3 else (),
                                removing_replicas=s.removing_replicas if version >= 3 else (),
                                is_new=s.is_new and version >= 1) for s in states]
    assert got == want


@pytest.mark.parametrize("isr, replicas, adding, removing", [
    ((), (), (), ()), ((1,), (1, 2), (), ()), ((1, 2, 3), (1, 2, 3, 4), (4,), (1,)), ((7,), (7, 8, 9), (8, 9), (7,))])
def test_wire_weight_is_the_weight_of_the_wire_dict(isr, replicas, adding, removing):
    """The controller chunks LeaderAndIsr requests by ``wire_weight`` instead of walking each ``to_wire`` dict:
    the two must agree, or a chunk could pass the receiver's request.max.elements."""
    from kbroker.controller.batch import _weight
    pl = PartitionLeadership("t", 3, LeaderAndIsr(1, 5, isr, 2, 9), replicas, adding, removing, True)
    assert pl.wire_weight() == _weight(pl.to_wire())
