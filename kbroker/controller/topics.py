"""Topic creation for CreateTopics and auto-creation in cluster mode: validate, assign, write the znodes.

The controller is not called: ``create_topic`` writes ``/config/topics/<t>`` then ``/brokers/topics/<t>`` through
TopicStore, and the active controller picks the topic up through its ``/brokers/topics`` watch, exactly as it does
for a topic written by ``kbroker-admin topics --zookeeper`` or Kafka's tools. So both paths elect leaders the same
way. Runs on any broker (it only touches ZooKeeper); the caller may block on it.

Validation (Kafka's AdminManager/AdminUtils codes): name -> INVALID_TOPIC_EXCEPTION (17); exists ->
TOPIC_ALREADY_EXISTS (36); explicit assignment together with a count/factor other than -1 -> INVALID_REQUEST (42);
partition ids not 0..n-1, empty or duplicate replica lists, unequal replica counts or unregistered brokers ->
INVALID_REPLICA_ASSIGNMENT (39); partitions <= 0 -> INVALID_PARTITIONS (37); replication factor <= 0 or above the
number of live brokers -> INVALID_REPLICATION_FACTOR (38); configs -> whatever ``validate_configs`` raises
(INVALID_CONFIG 40). Replica placement: Kafka's assignReplicasToBrokers over the live brokers and their racks
(``assignment.py``), rack-aware when every live broker has a rack ("safe" mode, as Kafka's auto-creation).
"""
from kbroker import errors
from kbroker.config import validate_topic_config
from kbroker.coord.errors import NoNodeError
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.coord.znodes import BrokerIdZNode


def live_brokers(backend):
    """[(broker id, rack or None)] of the registered brokers, sorted by id."""
    out = []
    try:
        ids = backend.get_children("/brokers/ids")
    except NoNodeError:
        return out
    for c in ids:
        data, _ = backend.get_or_none(BrokerIdZNode.path(int(c)))
        if data is not None:
            out.append((int(c), BrokerIdZNode.decode(data).rack))
    return sorted(out)


def live_broker_hosts(backend):
    """{broker id: host of its first registered endpoint} for host-aware placement (controller/assignment.py);
    a registration without endpoints is left out (that broker then counts as a host of its own)."""
    out = {}
    try:
        ids = backend.get_children("/brokers/ids")
    except NoNodeError:
        return out
    for c in ids:
        data, _ = backend.get_or_none(BrokerIdZNode.path(int(c)))
        if data is not None:
            eps = BrokerIdZNode.decode(data).endpoints
            if eps and eps[0][1]:
                out[int(c)] = eps[0][1]
    return out


def create_topic(topic_store, name, num_partitions=-1, replication_factor=-1, assignment=None, configs=None,
                 validate_only=False, default_partitions=1, default_replication_factor=1, validate_configs=None,
                 brokers=None):
    """Validate and write a new topic; returns its assignment {partition: [replicas]}.

    ``brokers``: [(id, rack)] to place replicas on (default: the registered brokers).
    """
    validate_topic_name(name)
    if topic_store.exists(name):
        raise errors.TopicAlreadyExists("Topic '%s' already exists." % name)
    configs = dict(configs or {})
    (validate_configs or validate_topic_config)(configs)  # ConfigError is INVALID_CONFIG (40), naming key and value
    if brokers is None:
        brokers = live_brokers(topic_store.backend)
    live_ids = {b for b, _ in brokers}
    if assignment:
        if num_partitions != -1 or replication_factor != -1:
            raise errors.InvalidRequest("Both a replica assignment and a partition count or replication factor "
                                        "were given")
        assignment = {int(p): [int(r) for r in reps] for p, reps in assignment.items()}
        if sorted(assignment) != list(range(len(assignment))):
            raise errors.InvalidReplicaAssignment("partitions must be numbered 0..%d" % (len(assignment) - 1))
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise errors.InvalidReplicaAssignment("every partition needs the same, non-zero number of replicas")
        for p, reps in sorted(assignment.items()):
            if len(set(reps)) != len(reps):
                raise errors.InvalidReplicaAssignment("partition %d lists a broker twice: %s" % (p, reps))
            missing = [r for r in reps if r not in live_ids]
            if missing:
                raise errors.InvalidReplicaAssignment("partition %d: brokers %s are not registered" % (p, missing))
    else:
        from kbroker.controller.assignment import SAFE, assign_replicas_to_brokers
        if num_partitions == -1:
            num_partitions = default_partitions
        if replication_factor == -1:
            replication_factor = default_replication_factor
        if num_partitions <= 0:
            raise errors.InvalidPartitions("Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            raise errors.InvalidReplicationFactor("Replication factor must be larger than 0.")
        if replication_factor > len(brokers):
            raise errors.InvalidReplicationFactor("Replication factor: %d larger than available brokers: %d."
                                                  % (replication_factor, len(brokers)))
        assignment = assign_replicas_to_brokers(brokers, num_partitions, replication_factor, rack_aware_mode=SAFE,
                                                hosts=live_broker_hosts(topic_store.backend))
    if not validate_only:
        topic_store.create_topic(name, assignment, configs)
    return assignment
