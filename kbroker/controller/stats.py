"""The controller's counters (Kafka's ``kafka.controller:type=ControllerStats`` MBeans), read by the metrics
collectors (kbroker/metrics/cluster.py) at scrape time. One writer: the controller's event greenlet.

* ``broker_changes`` / ``broker_change_ms`` -- Kafka's ``LeaderElectionRateAndTimeMs`` timer, which despite its
  name times the handling of every broker-change event on the active controller (Kafka's ControllerState
  BrokerChange keeps the old metric name "for compatibility"): a broker leaving or joining is when leaders are
  elected. ``broker_change_ms`` keeps the last ``SAMPLES`` durations (ms) for the quantiles, Yammer's sliding
  window reservoir; ``broker_changes`` counts them all.
* ``unclean_elections`` -- ``UncleanLeaderElectionsPerSec``: leaders chosen outside the ISR
  (``unclean.leader.election.enable``).
* ``leader_elections`` -- kbroker's own: partition leaders the controller changed to a live broker (offline
  elections, controlled shutdown, preferred leader, reassignment), one per partition state written.
"""
from collections import deque

# Durations kept for the timer's quantiles (Yammer's default reservoir holds 1,028 samples).
SAMPLES = 1024


class ControllerStats:
    __slots__ = ("broker_changes", "broker_change_ms", "unclean_elections", "leader_elections")

    def __init__(self):
        self.broker_changes = 0
        self.broker_change_ms = deque(maxlen=SAMPLES)
        self.unclean_elections = 0
        self.leader_elections = 0

    def record_broker_change(self, ms):
        self.broker_changes += 1
        self.broker_change_ms.append(ms)
