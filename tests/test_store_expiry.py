"""The one expiry rule (store/expiry.py): the row, point-read and column forms agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opendata_kv.store import expiry

NOW = 1_700_000_000_000
HOUR = 3_600_000
stamps = st.one_of(st.none(), st.integers(NOW - 5, NOW + 5))
# offsets from the clock far enough that reading it a little later changes nothing
offsets = st.one_of(st.none(), st.sampled_from([-HOUR, -1, HOUR]))


@settings(max_examples=200, deadline=None)
@given(st.lists(stamps, max_size=20))
def test_row_and_column_forms_agree_at_a_given_now(expires: list[int | None]) -> None:
    by_row = [i for i, e in enumerate(expires) if not expiry.is_expired(e, NOW)]
    positions = expiry.live_positions(expires, NOW)
    assert (list(range(len(expires))) if positions is None else positions) == by_row
    assert positions is None or len(positions) < len(expires)


@settings(max_examples=100, deadline=None)
@given(st.lists(offsets, max_size=20))
def test_point_and_column_forms_read_the_clock_alike(shifts: list[int | None]) -> None:
    now = expiry.now_ms()
    expires = [None if s is None else now + s for s in shifts]
    keys = [bytes([i]) for i in range(len(expires))]
    alive = [i for i, s in enumerate(shifts) if s is None or s > 0]
    positions = expiry.live_positions(expires)
    kept = keys if positions is None else [keys[i] for i in positions]
    assert kept == [keys[i] for i in alive]
    points = [expiry.live_value((k, e)) for k, e in zip(keys, expires, strict=True)]
    assert [i for i, v in enumerate(points) if v is not None] == alive


def test_the_boundary_is_expired_and_no_ttl_never_is() -> None:
    assert expiry.is_expired(NOW, NOW)
    assert not expiry.is_expired(NOW + 1, NOW)
    assert not expiry.is_expired(None, NOW)
    assert expiry.live_value(None) is None
    assert expiry.live_positions([None, None], NOW) is None
