"""make_owner_call: a function sent from a worker thread runs on the event loop's thread; errors come back."""
import gevent
import pytest
from gevent import monkey

from kbroker.server.loopcall import make_owner_call

_get_ident = monkey.get_original("_thread", "get_ident")


def test_worker_thread_call_runs_on_loop_thread_and_returns():
    hub = gevent.get_hub()
    call = make_owner_call(hub)
    loop_ident = _get_ident()
    seen = []

    def fn():
        seen.append(_get_ident())
        return 42

    assert hub.threadpool.apply(call, (fn,)) == 42
    assert seen == [loop_ident]


def test_worker_thread_call_propagates_errors():
    hub = gevent.get_hub()
    call = make_owner_call(hub)

    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        hub.threadpool.apply(call, (boom,))


def test_call_on_loop_thread_runs_inline():
    call = make_owner_call(gevent.get_hub())
    assert call(lambda: "inline") == "inline"
