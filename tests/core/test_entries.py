"""`new_entry` builds exactly what ``Entry(...)`` builds.

The core builds every entry with `inturn._entries.new_entry`, which skips
the class call for speed and so restates each field's default: these tests
hold it to the class, field by field, so that a field added with a default
cannot be left unset there.
"""

from __future__ import annotations

import attrs
from hypothesis import given, strategies as st

from inturn._entries import Entry, new_entry


@given(
    job_id=st.integers(min_value=1),
    place=st.integers(min_value=1),
    key=st.none() | st.text(max_size=5),
    data=st.binary(max_size=5),
    unique=st.none() | st.text(max_size=5),
)
def test_new_entry_builds_what_the_class_builds(
    job_id: int, place: int, key: str | None, data: bytes, unique: str | None
) -> None:
    lane = job_id if key is None else key
    fast = new_entry(job_id, place, key, data, unique, lane)
    slow = Entry(job_id, place, key, data, unique, lane)
    assert type(fast) is Entry
    for field in attrs.fields(Entry):
        assert getattr(fast, field.name) is getattr(slow, field.name), field.name
    assert repr(fast) == repr(slow)
