"""Shared fixtures for the controller tests: one embedded backend, several Controllers, fake channels."""
import gevent
import pytest

from kbroker.coord import EmbeddedBackend, TopicStore
from kbroker.coord.znodes import BrokerIdZNode, ensure_persistent_paths
from kbroker.controller.channel import VERSIONS, success_response
from kbroker.controller.controller import Controller
from kbroker.protocol.apis import APIS

LAI, STOP, UM = 4, 5, 6


class FakeChannel:
    """Records every request (after a codec round trip, so bodies are what a broker would decode) and answers
    with ``respond(broker, api_key, body)`` (default: success for every partition), synchronously."""

    def __init__(self):
        self.connected = set()
        self.sent = []
        self.respond = None

    def add_broker(self, bid, host, port, listener=None):
        self.connected.add(bid)

    def remove_broker(self, bid):
        self.connected.discard(bid)

    def remove_all(self):
        self.connected.clear()

    def send(self, bid, api_key, body, callback=None):
        if bid not in self.connected:
            return False
        v = VERSIONS[api_key]
        api = APIS[api_key]
        body = api.decode_request(v, api.encode_request(v, body).getvalue())
        self.sent.append((bid, api_key, body))
        if callback is not None:
            resp = self.respond(bid, api_key, body) if self.respond else success_response(api_key, body)
            callback(resp)
        return True

    def take(self, api_key=None, broker=None):
        """Requests sent since the last take (filtered); clears the whole log."""
        out = [(b, k, body) for b, k, body in self.sent
               if (api_key is None or k == api_key) and (broker is None or b == broker)]
        self.sent = []
        return out


def lai_states(body):
    """{(topic, p): partition state} of a LeaderAndIsr v4 body."""
    return {(ts["topic_name"], ps["partition_index"]): ps for ts in body["topic_states"] for ps in ts["partition_states"]}


def um_states(body):
    return {(ts["topic_name"], ps["partition_index"]): ps for ts in body["topic_states"] for ps in ts["partition_states"]}


def stop_states(body):
    return {(ts["topic_name"], ps["partition_index"]): ps["delete_partition"]
            for ts in body["topic_states"] for ps in ts["partition_states"]}


def register(backend, bid, rack=None):
    backend.create(BrokerIdZNode.path(bid),
                   BrokerIdZNode.encode([("PLAINTEXT", "127.0.0.1", 9090 + bid)], {"PLAINTEXT": "PLAINTEXT"},
                                        rack=rack),
                   ephemeral=True, makepath=True)


def unregister(backend, bid):
    backend.delete(BrokerIdZNode.path(bid))


class Cluster:
    def __init__(self, backend, ids, config):
        self.backend = backend
        self.store = TopicStore(backend)
        self.ctrls = {}
        self.channels = {}
        self.config = config
        for bid in ids:
            register(backend, bid)
        for bid in ids:
            self.add_controller(bid)
        self.settle()

    def add_controller(self, bid):
        ch = FakeChannel()
        c = Controller(bid, self.backend, ch, dict(self.config))
        self.ctrls[bid], self.channels[bid] = c, ch
        c.start()
        return c

    def settle(self, timeout=5.0):
        """Wait until every controller's queue is empty (events can cascade between them)."""
        deadline = gevent.get_hub().loop.now() + timeout
        while True:
            gevent.sleep(0)
            if all(c.wait_idle(max(0.01, deadline - gevent.get_hub().loop.now())) for c in self.ctrls.values()):
                gevent.sleep(0)
                if all(c._pending == 0 for c in self.ctrls.values()):
                    return
            assert gevent.get_hub().loop.now() < deadline, "controllers did not settle"

    def active(self):
        act = [c for c in self.ctrls.values() if c.active]
        assert len(act) == 1, [c.broker_id for c in act]
        return act[0]

    def channel(self):
        return self.channels[self.active().broker_id]

    def state(self, topic, p):
        data, _ = self.backend.get("/brokers/topics/%s/partitions/%d/state" % (topic, p))
        return data

    def stop(self):
        for c in self.ctrls.values():
            c.stop()


@pytest.fixture
def backend(tmp_path):
    b = EmbeddedBackend(str(tmp_path)).start()
    ensure_persistent_paths(b)
    yield b
    b.stop()


def make_cluster(backend, ids=(1, 2, 3), **config):
    cfg = {"auto.leader.rebalance.enable": False}
    cfg.update(config)
    return Cluster(backend, ids, cfg)
