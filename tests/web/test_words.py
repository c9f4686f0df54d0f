"""The plain words the pages say about a key, a member and a payload."""

from __future__ import annotations

import attrs
import pytest

from inturn.info import JobInfo, KeyInfo, MemberInfo
from inturn.web._words import clock, member_state, owner, payload, reason

NOW = 1_800_000_000.0

HEAD = KeyInfo(
    key="acct",
    queued=3,
    halted=False,
    head_job_id=812,
    head_state="queued",
    head_attempt=0,
    head_age=3.4,
    next_retry_at=None,
    last_error=None,
)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({}, "waiting for a slot: job 812, accepted 3s ago"),
        (
            {"head_state": "running", "head_attempt": 2},
            "running job 812 (attempt 2, accepted 3s ago)",
        ),
        (
            {
                "head_state": "retrying",
                "next_retry_at": NOW + 10,
                "last_error": "TimeoutError: slow\n  more lines",
            },
            "retrying job 812 at 2027-01-15 08:00:10 UTC after: TimeoutError: slow ...",
        ),
        (
            {"halted": True, "halted_by": 640, "halt_error": "ValueError: no such account"},
            "halted by job 640: ValueError: no such account",
        ),
        ({"halted": True}, "paused by an operator"),
        (
            {"queued": 0, "head_job_id": None, "head_state": None, "head_age": None},
            "no unfinished jobs",
        ),
    ],
)
def test_a_key_says_why_it_is_not_running(changes: dict[str, object], said: str) -> None:
    assert reason(attrs.evolve(HEAD, **changes), NOW) == said  # type: ignore[arg-type]


def test_an_owner_says_its_heartbeat_and_whether_it_expired() -> None:
    assert owner(HEAD) == "-"
    live = attrs.evolve(HEAD, owner="host:41", owner_heartbeat_age=2.0)
    assert owner(live) == "host:41 (heartbeat 2s ago)"
    dead = attrs.evolve(live, owner_expired=True, owner_heartbeat_age=31.0)
    assert owner(dead) == "host:41 (EXPIRED, heartbeat 31s ago)"


def test_a_member_says_when_it_expires() -> None:
    member = MemberInfo(
        id=7,
        name="host:41",
        started_at=NOW,
        heartbeat_age=1.0,
        expires_in=9.0,
        expired=False,
        keys=3,
        keyless_jobs=0,
    )
    assert member_state(member) == "live, expires in 9s"
    assert member_state(attrs.evolve(member, expired=True, expires_in=-1.0)) == "EXPIRED"


def test_a_payload_is_its_size_and_kind() -> None:
    job = JobInfo(
        id=1,
        key="acct",
        state="queued",
        attempts=0,
        unique=None,
        accepted_at=NOW,
        finished_at=None,
        last_error=None,
        retry_at=None,
        data=b'{"card":"4111"}',
        place=1,
        due_at=None,
        stopped_during=None,
    )
    assert payload(job) == "15 bytes, text"
    assert payload(attrs.evolve(job, data=b"\xff\x00")) == "2 bytes, binary"


def test_a_time_is_shown_in_utc() -> None:
    assert clock(NOW) == "2027-01-15 08:00:00 UTC"
    assert clock(None) == "-"
