"""Run a function on the gevent event loop's thread from a worker thread, and wait for its result.

Worker threads (fsync, the log cleaner) must not mutate state the event loop reads (see ``Log.owner_call``).
``make_owner_call(hub)`` returns a callable that schedules ``fn`` with ``loop.run_callback_threadsafe`` and blocks the
*worker* on a native lock (gevent's patched locks are not safe across native threads) until the loop has run it.
Called from the loop thread itself it just runs ``fn``.
"""
from gevent import monkey

_allocate_lock = monkey.get_original("_thread", "allocate_lock")
_get_ident = monkey.get_original("_thread", "get_ident")


def make_owner_call(hub):
    loop_thread = _get_ident()

    def owner_call(fn):
        if _get_ident() == loop_thread:
            return fn()
        done = _allocate_lock()
        done.acquire()
        box = {}

        def run():
            try:
                box["result"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised in the worker
                box["error"] = e
            finally:
                done.release()
        hub.loop.run_callback_threadsafe(run)
        done.acquire()
        if "error" in box:
            raise box["error"]
        return box["result"]
    return owner_call

