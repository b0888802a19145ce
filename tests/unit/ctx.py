"""Request contexts for handler tests: build the one collaborator a test needs, never a whole fake broker.

``make_ctx(version, replicas=..., config=...)`` -> a real ``RequestContext`` whose ``Services`` hold what the test
passed; every collaborator it did not pass is an ``Unused`` that fails the test on first use (naming it), so a
handler reaching for something the test did not expect shows up instead of being silently satisfied.
"""
from gevent.event import Event

from kbroker.server.context import ANONYMOUS, IN_PROCESS, ClientIdentity, RequestContext, Services


class Unused:
    """A collaborator the test did not provide: any attribute access fails the test."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        raise AssertionError("the handler used services.%s.%s, which this test did not provide"
                             % (self._name, attr))

    def __bool__(self):
        raise AssertionError("the handler tested services.%s, which this test did not provide" % self._name)


class FakeConn:
    """The connection hooks handlers use: ``closing`` ends long waits."""
    closing = False


def ready_event():
    ev = Event()
    ev.set()
    return ev


def make_services(**given):
    """``Services`` with ``given`` collaborators; ``config`` defaults to {}, ``ready`` to a set Event and
    ``authorizer`` to None (no authorizer: every request allowed, as in Kafka), ``quotas`` to None (no
    quotas), ``replication`` to None (no replication throttle) and ``stats`` to None (nothing counted)."""
    fields = dict(config={}, broker_id=1, cluster_id="test-cluster", ready=ready_event(), authorizer=None,
                  quotas=None, replication=None, stats=None, broker_configs=None, fetch_sessions=None)
    for name in Services.__dataclass_fields__:
        fields.setdefault(name, Unused(name))
    fields.update(given)
    return Services(**fields)


def identity(listener="PLAINTEXT", host="127.0.0.1", port=50000, protocol="PLAINTEXT"):
    return ClientIdentity(listener, protocol, ANONYMOUS, host, port)


def make_ctx(version, *, api_key=-1, client_id="c", listener="PLAINTEXT", connection=None, services=None,
             in_process=False, **given):
    """A RequestContext of ``version`` over ``services`` (or ``make_services(**given)``); ``connection`` defaults
    to a FakeConn (None on the in-process path)."""
    if services is None:
        services = make_services(**given)
    elif given:
        raise TypeError("pass services or collaborators, not both")
    ident = IN_PROCESS if in_process else identity(listener)
    if connection is None and not in_process:
        connection = FakeConn()
    return RequestContext(ident, services, api_key, version, 1, client_id, connection)
