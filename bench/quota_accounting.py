#!/usr/bin/env python3
"""In-process CPU cost of client-quota accounting on the unthrottled produce path (issue 12), per request.

    .venv/bin/python bench/quota_accounting.py [--requests N] [--repeat R]

What is timed is exactly the quota work a Produce request adds: the Connection's part (``quotas.request.enabled()``;
when a request quota exists anywhere, two ``perf_counter`` reads and ``quotas.request.record``) and the Produce
handler's (``_record_quota``: ``quotas.produce.enabled()``; when a producer quota exists anywhere, the sum of the
record sizes and ``quotas.produce.record``), minus the same loop without it (building the RequestContext), best
of ``--repeat`` runs. Four cases:

  none configured   ClientQuotas over a QuotaLimits with no quota (what every broker runs until one is set)
  other clients     producer_byte_rate + request_percentage set for client id ``other`` and a user quota for
                    ``alice``: this client (ANONYMOUS, ``fast``) has none, so each kind is one precedence lookup
  own quota         this client has quotas it never reaches: both rates are recorded and measured per request

With ``Services.quotas`` None (unit tests) the cost is one attribute test. Compare with bench_append.py's
``produce-1k`` (Partition.append of one 16 x 1 KB batch) for the share of a request. Prints one JSON line.
"""
import argparse
import json
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.handlers.produce import _record_quota  # noqa: E402
from kbroker.quota.manager import ClientQuotas  # noqa: E402
from kbroker.quota.store import QuotaLimits  # noqa: E402
from kbroker.server.context import ANONYMOUS, ClientIdentity, RequestContext  # noqa: E402

IDENT = ClientIdentity("PLAINTEXT", "PLAINTEXT", ANONYMOUS, "127.0.0.1", 1)
REQ = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": bytes(16384)}]}]}


def _limits(entities):
    limits = QuotaLimits(None)
    for (user, client), quotas in entities.items():
        limits._apply(user, client, quotas)   # what a /config/changes notification applies, without a backend
    return limits


def _with_quotas(quotas):
    def one():
        ctx = RequestContext(IDENT, None, 0, 9, 1, "fast")
        if not quotas.request.enabled():
            _record_quota(ctx, quotas, REQ, 1)
            return
        started = time.perf_counter()
        _record_quota(ctx, quotas, REQ, 1)
        spent = max(0.0, time.perf_counter() - started - ctx.parked_s) * 100.0
        ctx.throttle(quotas.request.record(IDENT, "fast", spent))
    return one


def _without():
    RequestContext(IDENT, None, 0, 9, 1, "fast")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cases = {
        "none configured": {},
        "other clients": {(False, "other"): {"producer_byte_rate": 1e6, "request_percentage": 50.0},
                          ("alice", False): {"producer_byte_rate": 1e6}},
        "own quota": {(False, "fast"): {"producer_byte_rate": 1e15, "request_percentage": 1e9}},
    }
    n = args.requests
    base = min(timeit.repeat(_without, number=n, repeat=args.repeat)) / n
    out = {}
    for name, entities in cases.items():
        fn = _with_quotas(ClientQuotas(_limits(entities), 11, 1))
        out[name] = round((min(timeit.repeat(fn, number=n, repeat=args.repeat)) / n - base) * 1e6, 3)
    print(json.dumps({"us_per_request": out}))


if __name__ == "__main__":
    main()
