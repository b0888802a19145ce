"""Producer ids for InitProducerId, leased in blocks of 1000 from ``/latest_producer_id_block``.

Kafka's ZooKeeper layout (ZkData ProducerIdBlockZNode): ``{"version":1,"broker":N,"block_start":"S",
"block_end":"E"}``; a broker claims the next block with a conditional set, so ids are unique across brokers and
restarts (a restarted broker takes a fresh block; the unused rest of its old block is simply skipped).
"""
import json

from kbroker.coord.errors import BadVersionError, NodeExistsError

PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


def _encode(broker_id, start):
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(start),
                       "block_end": str(start + BLOCK_SIZE - 1)}, separators=(",", ":")).encode()


class ProducerIdManager:
    def __init__(self, backend, broker_id):
        self.backend = backend
        self.broker_id = broker_id
        self._next = None
        self._end = -1

    def next_id(self):
        if self._next is None or self._next > self._end:
            self._lease()
        pid = self._next
        self._next += 1
        return pid

    def _lease(self):
        while True:
            data, stat = self.backend.get_or_none(PATH)
            if data is None:
                start = 0
                try:
                    self.backend.create(PATH, _encode(self.broker_id, start), makepath=True)
                except NodeExistsError:
                    continue
            else:
                start = int(json.loads(data)["block_end"]) + 1
                try:
                    self.backend.set(PATH, _encode(self.broker_id, start), version=stat.version)
                except BadVersionError:
                    continue  # another broker took this block: read again
            self._next, self._end = start, start + BLOCK_SIZE - 1
            return
