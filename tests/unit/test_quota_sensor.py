"""kbroker/quota/sensor.py: Kafka's sampled Rate, exact values on a fake clock (ms)."""
import pytest

from kbroker.quota.sensor import Rate


def test_a_first_burst_is_measured_over_samples_minus_one_whole_windows():
    r = Rate(11, 1000)
    r.record(1000, 0)
    assert r.window_size(0) == 10000            # 0 ms elapsed, raised to 10 whole windows
    assert r.measure(0) == 100.0
    r.record(500, 999)                          # same window (999 < 1000 ms old)
    assert r.window_size(999) == 10999          # 999 ms elapsed + 10 windows (no whole one has passed)
    assert r.measure(999) == pytest.approx(1500 / 10.999, rel=1e-12)


def test_windows_advance_and_the_ring_wraps():
    r = Rate(11, 1000)
    for t in range(0, 11000, 1000):             # one 100-value record at the start of each of 11 windows
        r.record(100, t)
    assert r.total(10000) == 1100
    assert r.window_size(10000) == 10000        # oldest starts at 0: 10 whole windows, no padding
    assert r.measure(10000) == 110.0
    r.record(100, 11000)                        # the 12th window reuses the slot of the one that started at 0
    assert r.total(11000) == 1100
    assert r.window_size(11000) == 10000        # oldest now starts at 1000
    assert r.measure(11500) == pytest.approx(1100 / 10.5, rel=1e-12)


def test_windows_older_than_the_whole_span_are_purged():
    r = Rate(11, 1000)
    r.record(5000, 0)
    assert r.total(10999) == 5000
    assert r.total(11000) == 0                  # 11 x 1000 ms old: reset
    assert r.measure(11000) == 0.0


def test_a_record_after_a_gap_starts_a_new_window_at_its_own_time():
    r = Rate(3, 1000)
    r.record(10, 0)
    r.record(20, 2500)                          # not 2000: the new window starts when the record comes
    assert r.window_size(2500) == 2500          # 2 whole windows elapsed = samples - 1: no padding
    assert r.measure(2500) == 30 / 2.5


def test_one_sample_never_divides_by_zero():
    r = Rate(1, 1000)
    r.record(10, 0)
    assert r.window_size(0) == 1
    assert r.measure(0) == 10000.0


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        Rate(0, 1000)
    with pytest.raises(ValueError):
        Rate(11, 0)


def test_measure_with_window_agrees_with_its_parts():
    records = ((0, 100), (300, 50), (1500, 25), (4000, 400), (12500, 7))
    for k in range(1, len(records) + 1):
        t = records[k - 1][0]
        for now in (t, t + 999, t + 5000, t + 11000):
            a, b = Rate(11, 1000), Rate(11, 1000)
            for when, v in records[:k]:
                a.record(v, when)
                b.record(v, when)
            assert a.measure_with_window(now) == (b.total(now) / (b.window_size(now) / 1000.0), b.window_size(now))
