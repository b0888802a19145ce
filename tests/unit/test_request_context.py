"""The handlers' seams (kbroker/server/context.py): what a request carries, who is asking, and the collaborators.

* a request arriving on a socket reaches its handler with the connection's identity (listener, security protocol
  from listener.security.protocol.map, principal User:ANONYMOUS, peer address), its header fields and the broker's
  Services -- exactly those objects;
* the real collaborators offer every member of the protocol the handlers are typed with (a handler calling a
  method the real object lacks would only fail in a running broker);
* no handler reaches past the context: no ``.broker`` attribute, no ``getattr`` probing of the context or its
  services (the guards issue 9 removed).
"""
import ast
import inspect
import struct
from pathlib import Path

import gevent
import pytest
from gevent import monkey

from kbroker.config import BrokerConfig
from kbroker.coordinator.coordinator import GroupCoordinator
from kbroker.controller.controller import Controller
from kbroker.producer_ids import ProducerIdManager
from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.quota.manager import ClientQuotaManager, ClientQuotas
from kbroker.replica.manager import ReplicaManager
from kbroker.quota.replication import ReplicationQuota
from kbroker.security.scram_store import ScramAdmin
from kbroker.server import context
from kbroker.server.context import ANONYMOUS, IN_PROCESS, ClientIdentity, RequestContext
from kbroker.server.router import Handler, Router
from kbroker.server.server import KafkaServer
from kbroker.topic_admin import TopicAdmin
from kbroker.transaction.coordinator import TransactionCoordinator
from tests.unit.ctx import Unused, make_services

REPO = Path(__file__).resolve().parents[2]
_real_socket = monkey.get_original("socket", "socket")


# ---------------------------------------------------------------------------------------------- identity

def test_identity_of_an_accepted_connection():
    pmap = {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}
    ident = ClientIdentity.accepted("EXTERNAL", pmap, ("10.1.2.3", 40000))
    assert ident == ClientIdentity("EXTERNAL", "SASL_SSL", "User:ANONYMOUS", "10.1.2.3", 40000)
    assert not ident.in_process
    # A listener missing from the map is named after its protocol (Kafka's rule).
    assert ClientIdentity.accepted("PLAINTEXT", {}, ("::1", 9, 0, 0)).security_protocol == "PLAINTEXT"
    assert IN_PROCESS.in_process and IN_PROCESS.listener is None and IN_PROCESS.principal == ANONYMOUS
    with pytest.raises(AttributeError):
        ident.principal = "User:admin"      # frozen: what authorization keys on cannot change under a request


def _serve(services, seen):
    def api_versions(ctx, req):
        seen.append(ctx)
        return {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    router = Router({18: Handler(APIS[18], 0, 3, api_versions)})
    srv = KafkaServer(services, router, [("CLIENTS", "127.0.0.1", 0)], max_request_size=1 << 20)
    srv.start()
    return srv, srv.bound_ports()["CLIENTS"]


def _ask(port, corr, client_id):
    """One ApiVersions v0 on a real thread's blocking socket -> (our local port, the response's correlation id)."""
    def run():
        s = _real_socket()
        s.settimeout(5.0)
        s.connect(("127.0.0.1", port))
        try:
            payload = bytes(encode_request_header(1, 18, 0, corr, client_id)) + APIS[18].encode_request(
                0, {}).getvalue()
            s.sendall(struct.pack(">i", len(payload)) + payload)
            head = b""
            while len(head) < 8:
                head += s.recv(8 - len(head))
            return s.getsockname()[1], struct.unpack(">ii", head)[1]
        finally:
            s.close()
    return gevent.get_hub().threadpool.apply(run)


def test_a_request_from_a_socket_carries_identity_header_and_services():
    config = BrokerConfig.from_dict({"listeners": "CLIENTS://127.0.0.1:0",
                                     "listener.security.protocol.map": "CLIENTS:PLAINTEXT"})
    services = make_services(config=config)
    seen = []
    srv, port = _serve(services, seen)
    try:
        local_port, corr = _ask(port, 4242, "me")
        assert corr == 4242
        local_port2, _ = _ask(port, 7, None)
    finally:
        srv.stop(grace_seconds=1)
    first, second = seen
    assert isinstance(first, RequestContext)
    assert first.identity == ClientIdentity("CLIENTS", "PLAINTEXT", "User:ANONYMOUS", "127.0.0.1", local_port)
    assert (first.api_key, first.api_version, first.correlation_id, first.client_id) == (18, 0, 4242, "me")
    assert first.services is services and first.connection is not None and first.listener == "CLIENTS"
    # Another connection, another identity; a null client_id stays None.
    assert second.identity.port == local_port2 != local_port and second.client_id is None
    assert second.services is services


# --------------------------------------------------------------------------------- the collaborators' types

def _members(proto):
    return {name: value for name, value in vars(proto).items()
            if not name.startswith("_") and inspect.isfunction(value)}


@pytest.mark.parametrize("proto,real", [
    (context.ReplicaAccess, ReplicaManager),
    (context.TopicAdministration, TopicAdmin),
    (context.ProducerIds, ProducerIdManager),
    (context.GroupCoordination, GroupCoordinator),
    (context.ControllerAccess, Controller),
    (context.ScramCredentials, ScramAdmin),
    (context.TransactionCoordination, TransactionCoordinator),
    (context.QuotaEnforcement, ClientQuotas),
    (context.QuotaManager, ClientQuotaManager),
    (context.ReplicationThrottle, ReplicationQuota),
], ids=lambda x: x.__name__)
def test_real_collaborators_offer_what_the_handlers_call(proto, real):
    assert _members(proto), proto
    for name, stub in _members(proto).items():
        impl = getattr(real, name, None)
        assert callable(impl), "%s has no %s() (%s)" % (real.__name__, name, proto.__name__)
        want = list(inspect.signature(stub).parameters)
        have = list(inspect.signature(impl).parameters)
        # the handlers pass the protocol's parameters positionally: the real method must take them in that order
        assert have[:len(want)] == want, "%s.%s%s vs %s" % (real.__name__, name, have, want)


def test_client_quotas_have_the_three_managers():
    assert set(context.QuotaEnforcement.__annotations__) == {"produce", "fetch", "request"}
    q = ClientQuotas(limits=None)
    assert all(isinstance(getattr(q, name), ClientQuotaManager) for name in ("produce", "fetch", "request"))


def test_throttle_keeps_the_largest_ask():
    ctx = RequestContext(IN_PROCESS, None, 0, 9)
    assert (ctx.throttle_ms, ctx.parked_s, ctx.quota_exempt) == (0, 0.0, False)
    ctx.throttle(0)
    ctx.throttle(250)
    ctx.throttle(100)
    assert ctx.throttle_ms == 250


def test_group_coordinator_has_active():
    assert "active" in context.GroupCoordination.__annotations__
    src = inspect.getsource(GroupCoordinator.__init__)
    assert "self.active =" in src


def test_transaction_coordinator_has_active():
    assert "active" in context.TransactionCoordination.__annotations__
    assert "self.active =" in inspect.getsource(TransactionCoordinator.__init__)


def test_unused_collaborator_fails_loudly():
    services = make_services()
    with pytest.raises(AssertionError, match="services.replicas.leader_partition"):
        services.replicas.leader_partition("t", 0)
    assert isinstance(services.groups, Unused)


# ------------------------------------------------------------------------------- handlers stay on the seams

def _handler_sources():
    return sorted((REPO / "kbroker" / "handlers").glob("*.py"))


def _forbidden(tree):
    """[(line, text)] of every ``.broker`` attribute and every getattr/hasattr probing the context or services."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "broker":
            out.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr") and node.args
              and any(word in ast.unparse(node.args[0]) for word in ("ctx", "services"))):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_no_handler_reaches_past_the_context():
    found = ["%s:%d %s" % (path.name, line, text) for path in _handler_sources()
             for line, text in _forbidden(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "handlers must use ctx.services / ctx.identity, not probe for members:\n  " + "\n  ".join(
        found)


def test_the_check_sees_what_it_forbids():
    """The check above finds the patterns it forbids (it would pass vacuously otherwise)."""
    src = ("def h(ctx, req):\n    b = ctx.broker\n    s = ctx.services\n"
           "    return getattr(s.services, 'groups', None) or hasattr(ctx, 'x') or getattr(req, 'y', 0)\n")
    assert [line for line, _ in _forbidden(ast.parse(src))] == [2, 4, 4]
