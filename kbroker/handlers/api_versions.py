"""ApiVersions (18), served v0-v3.

Behaviour: lists exactly the handlers the router has, with the version ranges they declare. v3 (flexible) carries
client_software_name/version, which we accept and ignore; the response's tagged fields (supported_features,
finalized_features...) are left at their defaults, so none are written -- librdkafka 2.0.2 (Debian's kcat) misreads
them. An unsupported ApiVersions version is answered by the connection itself (v0 body, error 35, KIP-511).
Deviation from Kafka: none known.
"""
from kbroker.server.router import handler


@handler(18, (0, 3))
def api_versions(ctx, req):
    keys = [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in ctx.connection.router.api_versions()]
    return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
