"""requeue, skip, pause, resume and purge: each fix, what it changes, and when it refuses."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from inturn.journal import SQLiteReader

from .conftest import Cli
from .scenario import Scenario, build_dead
from .test_read import column


def snapshot(path: Path) -> object:
    """Everything an operator can see in the file (ages left out: they move)."""
    reader = SQLiteReader(path)
    keys = [
        (info.key, info.queued, info.halted, info.head_job_id, info.head_state)
        for info in reader.keys(now=time.time())
    ]
    return keys, reader.dead_letters()


# -- skip -----------------------------------------------------------------------------


def test_skip_makes_a_retrying_head_a_dead_letter(cli: Cli, scenario: Scenario) -> None:
    """skip: the head is discarded unrun, "skipped by operator"; the next job heads its key."""
    result = cli("skip", scenario.path, scenario.stuck)
    assert result.code == 0
    assert result.out == (
        f"skipped job {scenario.stuck} of key 'a': it is a dead letter now"
        f" (inturn requeue {scenario.path} {scenario.stuck} puts it back, at the tail)\n"
    )
    reader = SQLiteReader(scenario.path)
    info = reader.job(scenario.stuck)
    assert info is not None
    assert (info.state, info.last_error) == ("dead", "skipped by operator")
    [a] = [key for key in reader.keys(now=time.time()) if key.key == "a"]
    assert (a.head_job_id, a.head_state, a.queued) == (scenario.behind[0], "queued", 2)


def test_skip_a_queued_job_behind_the_head(cli: Cli, scenario: Scenario) -> None:
    """A job behind the head can be skipped too; the head stays where it is."""
    result = cli("skip", scenario.path, scenario.behind[0], "--json")
    assert result.code == 0
    shown = json.loads(result.out)
    assert (shown["id"], shown["key"], shown["state"], shown["last_error"]) == (
        scenario.behind[0],
        "a",
        "dead",
        "skipped by operator",
    )
    [a] = [key for key in SQLiteReader(scenario.path).keys(now=time.time()) if key.key == "a"]
    assert (a.head_job_id, a.queued) == (scenario.stuck, 2)


def test_skip_a_completed_or_unknown_job_is_exit_1(cli: Cli, scenario: Scenario) -> None:
    """A completed job is forgotten: there is nothing to skip; nothing changes."""
    before = snapshot(scenario.path)
    for job_id in (scenario.done, 12345):
        result = cli("skip", scenario.path, job_id)
        assert (result.code, result.out) == (1, "")
        assert result.err == f"inturn: no unfinished job or dead letter has id {job_id}\n"
    assert snapshot(scenario.path) == before


def test_skip_a_dead_letter_is_exit_2(cli: Cli, scenario: Scenario) -> None:
    """A dead letter is already discarded: wrong state."""
    result = cli("skip", scenario.path, scenario.dead)
    assert (result.code, result.out) == (2, "")
    assert result.err == f"inturn: job {scenario.dead} is dead: it is a dead letter already\n"


# -- requeue --------------------------------------------------------------------------


def test_requeue_puts_a_dead_letter_at_the_tail_of_its_key(cli: Cli, scenario: Scenario) -> None:
    """requeue: a new id, behind the key's other jobs, attempts reset; the dead letter goes."""
    result = cli("requeue", scenario.path, scenario.dead)
    assert result.code == 0
    new_id = scenario.behind[1] + 1
    assert result.out == f"requeued job {scenario.dead} as job {new_id}, at the tail of its key\n"
    reader = SQLiteReader(scenario.path)
    assert reader.job(scenario.dead) is None
    info = reader.job(new_id)
    assert info is not None
    assert (info.key, info.state, info.attempts, info.data) == ("c", "queued", 0, b'"boom"')
    [c] = [key for key in reader.keys(now=time.time()) if key.key == "c"]
    assert (c.head_job_id, c.queued, c.halted) == (scenario.held, 2, True)  # still halted


def test_a_key_halted_by_a_requeued_job_names_the_job_it_became(
    cli: Cli, scenario: Scenario
) -> None:
    """The key stays halted, and says so by the job's new id, which show finds (issue 45,
    defect 5: it named the old id, which nothing finds any more)."""
    new_id = scenario.behind[1] + 1
    assert cli("requeue", scenario.path, scenario.dead).code == 0
    result = cli("keys", scenario.path, "--halted")
    assert column(result.out, "KEY") == ["c", "d"]
    assert column(result.out, "STATE")[0] == f"halted by job {new_id}"
    assert column(result.out, "LAST ERROR")[0].endswith("Boom: card declined")  # why, still
    [c, _] = json.loads(cli("keys", scenario.path, "--halted", "--json").out)
    assert (c["halted_by"], c["head_job_id"]) == (new_id, scenario.held)
    assert cli("show", scenario.path, new_id).code == 0


def test_requeue_several_ids_each_once(cli: Cli, tmp_path: Path) -> None:
    """Several ids in one command, in the order given; an id given twice is requeued once."""
    path = tmp_path / "raw.db"
    ids = build_dead(path, [b"one", b"two", b"three"])
    result = cli("requeue", path, ids[2], ids[0], ids[2], "--json")
    assert result.code == 0
    assert json.loads(result.out) == [
        {"id": ids[2], "new_id": ids[2] + 1, "error": None},
        {"id": ids[0], "new_id": ids[2] + 2, "error": None},
    ]
    assert [info.id for info in SQLiteReader(path).dead_letters()] == [ids[1]]


def test_requeue_checks_every_id_before_changing_anything(cli: Cli, scenario: Scenario) -> None:
    """One id that is not a dead letter refuses the whole command: exit 2, nothing requeued."""
    before = snapshot(scenario.path)
    result = cli("requeue", scenario.path, scenario.dead, scenario.stuck)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"inturn: job {scenario.stuck} is retrying: only a dead letter can be requeued\n"
    )
    result = cli("requeue", scenario.path, scenario.dead, scenario.done)
    assert (result.code, result.out) == (1, "")
    assert result.err == f"inturn: no unfinished job or dead letter has id {scenario.done}\n"
    assert snapshot(scenario.path) == before


def test_requeue_keeps_the_unique_rule(cli: Cli, scenario: Scenario) -> None:
    """A dead letter whose unique key an unfinished job holds now is refused: exit 2."""
    before = snapshot(scenario.path)
    result = cli("requeue", scenario.path, scenario.poison)
    assert (result.code, result.out) == (2, "")
    lines = result.err.splitlines()
    assert lines[0] == (
        f"inturn: job {scenario.poison} not requeued:"
        f" unique key 'order-1' is held by job {scenario.behind[1]}"
    )
    assert lines[1:] == ["inturn: requeued 0 of 1; 1 refused"]
    assert snapshot(scenario.path) == before


def test_requeue_all_dead_of_a_key(cli: Cli, scenario: Scenario) -> None:
    """--all-dead --key K: every dead letter of K, none of the others."""
    result = cli("requeue", scenario.path, "--all-dead", "--key", "c")
    assert result.code == 0
    assert result.out.startswith(f"requeued job {scenario.dead} as job ")
    assert [info.id for info in SQLiteReader(scenario.path).dead_letters()] == [scenario.poison]
    result = cli("requeue", scenario.path, "--all-dead", "--key", "c")
    assert (result.code, result.err) == (1, "inturn: no dead letters of key 'c' to requeue\n")


def test_requeue_all_dead_goes_on_past_a_refusal(cli: Cli, scenario: Scenario) -> None:
    """--all-dead requeues what it can, names what it could not, and exits 2."""
    result = cli("requeue", scenario.path, "--all-dead", "--json")
    assert result.code == 2
    done = json.loads(result.out)
    assert [(row["id"], row["new_id"] is None) for row in done] == [
        (scenario.dead, False),
        (scenario.poison, True),
    ]
    assert result.err.splitlines()[-1] == "inturn: requeued 1 of 2; 1 refused"
    assert [info.id for info in SQLiteReader(scenario.path).dead_letters()] == [scenario.poison]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty", [True, False])
def test_requeue_all_dead_draws_progress_on_a_terminal(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    """Many dead letters: a text progress bar on stderr if it is a terminal, nothing if not."""
    path = tmp_path / "raw.db"
    ids = build_dead(path, [b"%d" % n for n in range(150)])
    stderr = Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    result = cli("requeue", path, "--all-dead")
    assert result.code == 0
    assert len(result.out.splitlines()) == 150
    drawn = stderr.getvalue()
    if tty:
        assert drawn.startswith("\rrequeue [")
        assert drawn.endswith(f"\rrequeue [{'#' * 30}] 150/150 100%\n")
        assert drawn.count("\r") <= 101  # once per percent, not once per job
    else:
        assert drawn == ""
    assert SQLiteReader(path).dead_letters() == []
    assert [info.key for info in SQLiteReader(path).keys(now=time.time())] == sorted(
        {f"k{n % 7}" for n in range(len(ids))}
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "requeue: give job ids or --all-dead, not both or neither"),
        (["1", "--all-dead"], "requeue: give job ids or --all-dead, not both or neither"),
        (["1", "--key", "c"], "requeue: --key goes with --all-dead"),
    ],
)
def test_requeue_usage(cli: Cli, scenario: Scenario, argv: list[str], message: str) -> None:
    """Job ids or --all-dead, exactly one; --key only with --all-dead."""
    result = cli("requeue", scenario.path, *argv)
    assert (result.code, result.out, result.err) == (2, "", f"inturn: {message}\n")


# -- pause and resume -----------------------------------------------------------------


def test_pause_then_resume_a_key(cli: Cli, scenario: Scenario) -> None:
    """pause halts a key with work; resume lets it go again."""
    result = cli("pause", scenario.path, "a")
    assert result.code == 0
    assert result.out == "paused key 'a': none of its jobs start until it is resumed\n"
    halted = SQLiteReader(scenario.path).keys(state="halted", now=time.time())
    assert sorted(info.key for info in halted) == ["a", "c", "d"]
    assert json.loads(cli("pause", scenario.path, "a", "--json").out) == {
        "key": "a",
        "halted": True,
    }  # pausing twice is harmless

    result = cli("resume", scenario.path, "a", "--json")
    assert (result.code, json.loads(result.out)) == (0, {"key": "a", "halted": False})
    halted = SQLiteReader(scenario.path).keys(state="halted", now=time.time())
    assert sorted(info.key for info in halted) == ["c", "d"]


def test_resume_a_key_halted_by_a_discard(cli: Cli, scenario: Scenario) -> None:
    """resume works for a halted key with or without jobs left."""
    for key in ("c", "d"):
        result = cli("resume", scenario.path, key)
        assert result.code == 0
        assert result.out.startswith(f"resumed key {key!r}")
    assert SQLiteReader(scenario.path).keys(state="halted", now=time.time()) == []


def test_pause_of_an_unknown_key_is_exit_1(cli: Cli, scenario: Scenario) -> None:
    """A key with no jobs, never halted, or whose jobs all completed: nothing to pause."""
    before = snapshot(scenario.path)
    for key in ("nope", "b"):
        result = cli("pause", scenario.path, key)
        assert (result.code, result.out) == (1, "")
        assert result.err == f"inturn: key {key!r} has no unfinished jobs and is not halted\n"
    assert snapshot(scenario.path) == before


def test_resume_of_a_key_that_is_not_halted_is_exit_1(cli: Cli, scenario: Scenario) -> None:
    """Nothing to resume."""
    result = cli("resume", scenario.path, "a")
    assert (result.code, result.out) == (1, "")
    assert result.err == "inturn: key 'a' is not paused or halted: nothing to resume\n"


def test_pause_of_an_invalid_key_is_exit_2(cli: Cli, scenario: Scenario) -> None:
    """An empty key breaks the key rules."""
    result = cli("pause", scenario.path, "")
    assert (result.code, result.err) == (2, "inturn: key must not be empty\n")


# -- purge ----------------------------------------------------------------------------


def test_purge_deletes_dead_letters_older_than_the_age(cli: Cli, scenario: Scenario) -> None:
    """--older-than 7d keeps fresh dead letters (exit 1: nothing purged); 0s takes them all."""
    result = cli("purge", scenario.path, "--dead", "--older-than", "7d")
    assert (result.code, result.out) == (1, "")
    assert result.err == "inturn: no dead letters discarded more than 7d ago\n"
    assert len(SQLiteReader(scenario.path).dead_letters()) == 2

    result = cli("purge", scenario.path, "--dead", "--older-than", "0s", "--key", "d")
    assert (result.code, result.out) == (0, "purged 1 dead letter discarded more than 0s ago\n")
    assert [info.id for info in SQLiteReader(scenario.path).dead_letters()] == [scenario.dead]

    result = cli("purge", scenario.path, "--dead", "--older-than", "0s", "--json")
    assert (result.code, json.loads(result.out)) == (0, {"purged": 1})
    assert SQLiteReader(scenario.path).dead_letters() == []


def test_purge_needs_no_dead_flag_and_takes_bare_seconds(cli: Cli, scenario: Scenario) -> None:
    """``--dead`` is optional (dead letters are all purge deletes), and AGE may be plain seconds."""
    result = cli("purge", scenario.path, "--older-than", "90")
    assert (result.code, result.out) == (1, "")
    assert result.err == "inturn: no dead letters discarded more than 90s ago\n"
    assert len(SQLiteReader(scenario.path).dead_letters()) == 2

    result = cli("purge", scenario.path, "--older-than", "000", "--key", "d")
    assert (result.code, result.out) == (0, "purged 1 dead letter discarded more than 0s ago\n")
    result = cli("purge", scenario.path, "--older-than", "0s", "--dead", "--json")
    assert (result.code, json.loads(result.out)) == (0, {"purged": 1})
    assert SQLiteReader(scenario.path).dead_letters() == []

    result = cli("purge", scenario.path, "--older-than", "99999999999999999999999")
    assert (
        result.err == "inturn: no dead letters discarded more than 99999999999999999999999s ago\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: --older-than"),
        (["--dead"], "the following arguments are required: --older-than"),
        (
            ["--dead", "--older-than", "7x"],
            "argument --older-than: bad duration '7x':"
            " use e.g. 90 (seconds), 30s, 5m, 2h, 7d or 1h30m",
        ),
        (
            ["--older-than", "1.5"],
            "argument --older-than: bad duration '1.5':"
            " use e.g. 90 (seconds), 30s, 5m, 2h, 7d or 1h30m",
        ),
        (
            ["--dead", "--older-than", "-1d"],
            "argument --older-than: expected one argument",
        ),
        (
            ["--older-than", "9" * 400],
            f"argument --older-than: bad duration '{'9' * 400}': too long",
        ),
    ],
)
def test_purge_usage(cli: Cli, scenario: Scenario, argv: list[str], message: str) -> None:
    """A valid --older-than is required; nothing is purged otherwise."""
    result = cli("purge", scenario.path, *argv)
    assert (result.code, result.out) == (2, "")
    assert result.err == f"inturn: purge: {message} (see inturn purge --help)\n"
    assert len(SQLiteReader(scenario.path).dead_letters()) == 2
