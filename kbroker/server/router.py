"""Router: api_key -> handler, and the ApiVersions table derived from it.

Handlers register themselves with the ``handler`` decorator (``kbroker/handlers/*``), declaring the versions they
serve beside the code. The router advertises exactly those ranges in ApiVersions, so what we advertise is what
is implemented. A handler is ``fn(ctx, request_dict) -> response_dict | None``; None means "no response"
(Produce with acks=0). ``ctx`` is a ``RequestContext`` (``kbroker/server/context.py``: who is asking, the header
fields, the broker's collaborators). Handlers may block the calling greenlet (long-poll Fetch, acks=all waits).
"""
from kbroker.protocol.apis import APIS


class Handler:
    __slots__ = ("api", "min_version", "max_version", "fn")

    def __init__(self, api, min_version, max_version, fn):
        if not (api.valid[0] <= min_version <= max_version <= api.valid[1]):
            raise ValueError("%s serves v%d-%d outside its schema's v%d-%d"
                             % (api.name, min_version, max_version, api.valid[0], api.valid[1]))
        self.api = api
        self.min_version = min_version
        self.max_version = max_version
        self.fn = fn

    def serves(self, version):
        return self.min_version <= version <= self.max_version


_REGISTRY = {}


def handler(api_key, versions):
    """Decorator: ``@handler(3, (0, 9))`` registers fn as the Metadata handler for v0-v9."""
    def deco(fn):
        if api_key in _REGISTRY:
            raise RuntimeError("two handlers for api key %d" % api_key)
        _REGISTRY[api_key] = Handler(APIS[api_key], versions[0], versions[1], fn)
        return fn
    return deco


class Router:
    def __init__(self, handlers=None):
        """``handlers``: {api_key: Handler}; default: every handler registered so far. The composition root passes
        ``kbroker.handlers.registry()`` (the server layer never imports the handlers above it)."""
        self.handlers = dict(handlers) if handlers is not None else dict(_REGISTRY)

    def get(self, api_key):
        return self.handlers.get(api_key)

    def api_versions(self):
        """[(api_key, min, max)] sorted by key, for the ApiVersions response."""
        return [(k, h.min_version, h.max_version) for k, h in sorted(self.handlers.items())]
