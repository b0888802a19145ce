"""Controller at scale (issue 15 target 4), the soak run: 30,000 partitions (RF 2, each broker leading 10,000) on 3
brokers and a real 3-node ensemble, through bench/controller_scale.py's ``run`` and ``check``: a controlled shutdown
of a broker leading 10,000 partitions within 10 s; after a kill -9, records to a sample of the dead broker's
partitions acknowledged by new leaders within the session timeout + 2 s; both cost few ZooKeeper transactions
(multi transactions of up to 1,000 partition states, where one conditional set per partition would consume at least
one zxid per partition moved). The in-suite twin (300 partitions, same checks) shares the cluster of
tests/integration/test_controller_stalls.py.

``.venv/bin/python -m pytest -m soak tests/integration/test_controller_scale.py``
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.zk, pytest.mark.timeout(3600)]


def load_bench():
    """bench/controller_scale.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "controller_scale", Path(__file__).resolve().parents[2] / "bench" / "controller_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.soak
@pytest.mark.xfail(strict=False, reason="issue 15 target 4 is not met yet on this 2-core machine: a 10,000-partition "
                   "RF 3 CreateTopics timed out and new leaders of 3,000 partitions took 92.8 s (leader-epoch "
                   "checkpoint fsyncs on the become-leader path); XPASS when it is")
def test_controlled_shutdown_and_kill9_with_30000_partitions(tmp_path, zk_ensemble):
    """.venv/bin/python -m pytest -m soak tests/integration/test_controller_scale.py"""
    bench = load_bench()
    bench.check(bench.run(tmp_path / "cluster", zk_ensemble, 30000, 30, 2, 4000))
