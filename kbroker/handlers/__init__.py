"""One module per API family; each registers its handlers with ``kbroker.server.router.handler``."""
import importlib
import pkgutil


def registry():
    """Import every handler module (each registers itself) and return {api_key: Handler}."""
    from kbroker.server.router import _REGISTRY
    for m in pkgutil.iter_modules(__path__):
        importlib.import_module(__name__ + "." + m.name)
    return dict(_REGISTRY)
