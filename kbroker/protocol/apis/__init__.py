"""Registry of API schemas: every module in this package defines ``API``; ``APIS`` maps api_key -> Api."""
import importlib
import pkgutil

APIS = {}
BY_NAME = {}

for _m in pkgutil.iter_modules(__path__):
    _mod = importlib.import_module(__name__ + "." + _m.name)
    _api = getattr(_mod, "API", None)
    if _api is not None:
        if _api.key in APIS:
            raise RuntimeError("two schemas for api key %d" % _api.key)
        APIS[_api.key] = _api
        BY_NAME[_api.name] = _api
