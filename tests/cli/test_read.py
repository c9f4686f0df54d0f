"""status, keys, show and dead: what an operator reads from a journal file."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

import pytest
import trio

import inturn
from inturn.cli import job_json
from inturn.journal import SQLiteReader

from .conftest import Cli
from .scenario import SLOW, Scenario, build_dead


def rows(out: str) -> list[list[str]]:
    """A table's cells, split on runs of two spaces or more (cells hold single spaces)."""
    return [re.split(r" {2,}", line.strip()) for line in out.splitlines()]


def column(out: str, name: str) -> list[str]:
    """One column of a table, by its header, the header left out.

    Cells are cut where the headers start, so a misaligned table fails.
    """
    header, *lines = out.splitlines()
    starts = [match.start() for match in re.finditer(r"\S+(?: \S+)*", header)]
    index = [header[start:].split("  ")[0] for start in starts].index(name)
    end = starts[index + 1] if index + 1 < len(starts) else None
    cells = []
    for line in lines:
        assert starts[index] == 0 or line[starts[index] - 1] == " ", line
        cells.append(line[starts[index] : end].strip())
    return cells


# -- status -------------------------------------------------------------------------


def test_status_prints_totals_then_the_most_blocked_keys(cli: Cli, scenario: Scenario) -> None:
    """Totals count the keys (every one the table draws from: a halted key may have no
    job), those with work, their jobs, heads by state, halted keys, dead letters; the
    keys follow blocked first, oldest head first, a key without jobs last."""
    result = cli("status", scenario.path)
    assert result.code == 0
    assert result.err == ""
    totals, keys = result.out.split("\n\n")
    lines = totals.splitlines()
    assert [line.split("  ")[0] for line in lines] == [
        "keys",
        "keys with work",
        "queued jobs",
        "running",
        "retrying",
        "halted",
        "dead letters",
        "oldest head age",
    ]
    values = [line.split()[-1] for line in lines]
    assert values[:7] == ["3", "2", "4", "0", "1", "2", "2"]
    assert values[7].endswith("s") or values[7].endswith("m")  # an age, e.g. "0s"
    # the table is aligned: every total's value starts in the same column
    assert len({line.index(line.split()[-1]) for line in lines}) == 1

    title, table = keys.split("\n", 1)
    assert title == "MOST BLOCKED KEYS (3 of 3 keys; blocked first, oldest head first)"
    assert column(table, "KEY") == ["c", "a", "d"]
    assert column(table, "STATE") == [
        f"halted by job {scenario.dead}",  # the job whose discard halted it
        "retrying",
        f"halted by job {scenario.poison}",
    ]
    assert column(table, "QUEUED") == ["1", "3", "0"]
    assert column(table, "HEAD") == [str(scenario.held), str(scenario.stuck), "-"]
    assert column(table, "NEXT RETRY") == ["-", "in 11d13h", "-"]
    errors = column(table, "LAST ERROR")  # of the head; of the halting job on a halted key
    assert errors[0].endswith("Boom: card declined")
    assert "card declined" in errors[1]
    assert errors[2] == "inturn.errors.PermanentError: malformed entry"


def test_status_json_has_the_totals_and_key_objects(cli: Cli, scenario: Scenario) -> None:
    """--json: {"totals": {...}, "most_blocked": [KeyInfo fields, ...]}."""
    result = cli("status", scenario.path, "--json")
    assert result.code == 0
    status = json.loads(result.out)
    age = status["totals"].pop("oldest_head_age")
    assert isinstance(age, float)
    assert age >= 0
    assert status["totals"] == {
        "keys": 3,
        "keys_with_work": 2,
        "queued": 4,
        "running": 0,
        "retrying": 1,
        "halted": 2,
        "dead_letters": 2,
    }
    assert [key["key"] for key in status["most_blocked"]] == ["c", "a", "d"]
    a = status["most_blocked"][1]
    assert set(a) == {
        "key",
        "queued",
        "halted",
        "head_job_id",
        "head_state",
        "head_attempt",
        "head_age",
        "next_retry_at",
        "last_error",
        "halted_by",
        "halt_error",
        "owner",
        "owner_expired",
        "owner_heartbeat_age",
    }
    assert (a["head_job_id"], a["head_state"], a["head_attempt"], a["halted"]) == (
        scenario.stuck,
        "retrying",
        1,
        False,
    )
    assert a["next_retry_at"] > time.time() + SLOW - 3600
    assert "card declined" in a["last_error"]


def test_status_of_an_empty_journal_says_there_is_no_work(cli: Cli, tmp_path: Path) -> None:
    """A journal whose jobs all completed: zeros, no table, exit 0."""
    path = tmp_path / "empty.db"

    async def make() -> None:
        async with inturn.open_supervisor(_ok, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send("k", 1)

    trio.run(make)
    result = cli("status", path)
    assert result.code == 0
    assert result.out.splitlines()[-1] == "no keys with work"
    assert json.loads(cli("status", path, "--json").out)["most_blocked"] == []


async def _ok(job: inturn.Job) -> None:
    await trio.lowlevel.checkpoint()


# -- keys -----------------------------------------------------------------------------


def test_keys_lists_every_key_with_work_or_halted(cli: Cli, scenario: Scenario) -> None:
    """keys: the journal's order, oldest head first, a halted key without jobs last."""
    result = cli("keys", scenario.path)
    assert result.code == 0
    assert rows(result.out)[0] == [
        "KEY",
        "STATE",
        "QUEUED",
        "HEAD",
        "ATTEMPTS",
        "AGE",
        "NEXT RETRY",
        "LAST ERROR",
    ]
    assert column(result.out, "KEY") == ["c", "a", "d"]
    assert column(result.out, "ATTEMPTS") == ["0", "1", "-"]
    # aligned: each header starts where its column's cells start
    lines = result.out.splitlines()
    start = lines[0].index("QUEUED")
    assert {line[start:].split()[0] for line in lines[1:]} == {"1", "3", "0"}


def make_busy(path: Path) -> None:
    """A journal with one key, "busy", neither retrying nor halted: two jobs, queued."""

    async def make() -> None:
        async def slow(job: inturn.Job) -> None:
            await trio.sleep_forever()

        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(slow, journal=inturn.SQLiteJournal(path)) as sup:
                await sup.send("busy", 1)
                await sup.send("busy", 2)
                scope.cancel()

    trio.run(make)


def test_keys_blocked_keeps_retrying_and_halted_keys(cli: Cli, tmp_path: Path) -> None:
    """--blocked leaves out keys that merely have work; none blocked is exit 1."""
    path = tmp_path / "jobs.db"
    make_busy(path)
    assert column(cli("keys", path).out, "KEY") == ["busy"]
    result = cli("keys", path, "--blocked")
    assert (result.code, result.out, result.err) == (1, "", "inturn: no blocked keys\n")
    result = cli("keys", path, "--blocked", "--json")
    assert (result.code, json.loads(result.out)) == (1, [])


def test_keys_blocked_in_the_scenario(cli: Cli, scenario: Scenario) -> None:
    """Key "a" retries, "c" and "d" are halted: all three are blocked."""
    result = cli("keys", scenario.path, "--blocked")
    assert result.code == 0
    assert sorted(column(result.out, "KEY")) == ["a", "c", "d"]


def test_keys_halted_keeps_halted_keys_only(cli: Cli, scenario: Scenario, tmp_path: Path) -> None:
    """--halted: "c" and "d", halted by their discards, not "a", which is retrying."""
    result = cli("keys", scenario.path, "--halted")
    assert (result.code, result.err) == (0, "")
    assert column(result.out, "KEY") == ["c", "d"]
    assert column(result.out, "STATE") == [
        f"halted by job {scenario.dead}",
        f"halted by job {scenario.poison}",
    ]
    result = cli("keys", scenario.path, "--halted", "--json")
    assert [
        (info["key"], info["halted"], info["halted_by"], info["halt_error"])
        for info in json.loads(result.out)
    ] == [
        ("c", True, scenario.dead, "tests.cli.scenario.Boom: card declined"),
        ("d", True, scenario.poison, "inturn.errors.PermanentError: malformed entry"),
    ]

    make_busy(tmp_path / "busy.db")
    result = cli("keys", tmp_path / "busy.db", "--halted")
    assert (result.code, result.out, result.err) == (1, "", "inturn: no halted keys\n")


def test_keys_shows_which_job_halted_a_key_and_none_for_a_pause(
    cli: Cli, scenario: Scenario
) -> None:
    """A key halted by a discard names the job and shows its error; a paused key is "halted", with its head's error; a resumed key neither."""
    assert cli("pause", scenario.path, "a").code == 0
    assert cli("resume", scenario.path, "c").code == 0
    result = cli("keys", scenario.path)
    assert result.code == 0
    assert column(result.out, "KEY") == ["c", "a", "d"]
    assert column(result.out, "STATE") == ["queued", "halted", f"halted by job {scenario.poison}"]
    errors = column(result.out, "LAST ERROR")
    assert errors[0] == "-"
    assert errors[1].endswith("Boom: card declined")  # the head's own: a pause has none
    assert errors[2] == "inturn.errors.PermanentError: malformed entry"
    [a] = [
        info for info in json.loads(cli("keys", scenario.path, "--json").out) if info["key"] == "a"
    ]
    assert (a["halted"], a["halted_by"], a["halt_error"]) == (True, None, None)


async def test_keys_running_keeps_keys_whose_head_is_running(
    cli: Cli, scenario: Scenario, tmp_path: Path
) -> None:
    """--running, beside a live supervisor: the key whose head runs; in the scenario,
    where nothing runs, exit 1."""
    path = tmp_path / "live.db"

    async def slow(job: inturn.Job) -> None:
        await trio.sleep_forever()

    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(slow, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send("busy", 1)
            await sup.send("busy", 2)
            # The journal's thread commits the start: there is no event to await.
            while not SQLiteReader(path).keys(state="running", now=time.time()):  # noqa: ASYNC110
                await trio.sleep(0.01)
            result = cli("keys", path, "--running")
            assert (result.code, result.err) == (0, "")
            assert column(result.out, "KEY") == ["busy"]
            assert column(result.out, "STATE") == ["running"]
            result = cli("keys", path, "--running", "--json")
            assert [info["head_state"] for info in json.loads(result.out)] == ["running"]
            assert cli("keys", path, "--blocked").code == 1
            scope.cancel()

    result = cli("keys", scenario.path, "--running")
    assert (result.code, result.out, result.err) == (1, "", "inturn: no running keys\n")
    result = cli("keys", scenario.path, "--running", "--json")
    assert (result.code, json.loads(result.out)) == (1, [])


@pytest.mark.parametrize(
    ("first", "second"),
    [("--blocked", "--halted"), ("--halted", "--running"), ("--running", "--blocked")],
)
def test_keys_takes_one_state_filter_at_most(
    cli: Cli, scenario: Scenario, first: str, second: str
) -> None:
    """--blocked, --halted and --running exclude one another: exit 2, one line."""
    result = cli("keys", scenario.path, first, second)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"inturn: keys: argument {second}: not allowed with argument {first}"
        " (see inturn keys --help)\n"
    )


def test_keys_limit_shows_the_first_n_and_says_there_are_more(cli: Cli, scenario: Scenario) -> None:
    """--limit N prints N keys and a note on stderr when more exist."""
    result = cli("keys", scenario.path, "--limit", "2")
    assert result.code == 0
    assert column(result.out, "KEY") == ["c", "a"]
    assert result.err == "inturn: showing the first 2 keys; --limit N shows more\n"
    assert cli("keys", scenario.path, "--limit", "3").err == ""


@pytest.mark.parametrize(
    ("command", "note"),
    [
        (["keys"], "showing the first key only"),
        (["jobs", "a"], "showing the first job only"),
        (["dead"], "showing the first dead letter only"),
    ],
)
def test_a_limit_of_one_says_so_in_the_singular(
    cli: Cli, scenario: Scenario, command: list[str], note: str
) -> None:
    """--limit 1 with more to show: "the first key only", not "the first 1 keys"."""
    result = cli(command[0], scenario.path, *command[1:], "--limit", "1")
    assert result.code == 0
    assert result.err == f"inturn: {note}; --limit N shows more\n"


def test_keys_json_is_a_list_of_key_objects(cli: Cli, scenario: Scenario) -> None:
    """--json: the same keys as the reader's, with every KeyInfo field."""
    result = cli("keys", scenario.path, "--json")
    assert result.code == 0
    keys = json.loads(result.out)
    expected = SQLiteReader(scenario.path).keys(now=time.time())
    assert [key["key"] for key in keys] == [info.key for info in expected]
    for got, info in zip(keys, expected, strict=True):
        age = got.pop("head_age")
        assert (age is None) == (info.head_age is None)
        assert age is None or abs(age - info.head_age) < 5  # read a moment apart
        assert got == {
            "key": info.key,
            "queued": info.queued,
            "halted": info.halted,
            "head_job_id": info.head_job_id,
            "head_state": info.head_state,
            "head_attempt": info.head_attempt,
            "next_retry_at": info.next_retry_at,
            "last_error": info.last_error,
            "halted_by": info.halted_by,
            "halt_error": info.halt_error,
            "owner": info.owner,
            "owner_expired": info.owner_expired,
            "owner_heartbeat_age": info.owner_heartbeat_age,
        }


# -- show -----------------------------------------------------------------------------


def fields(out: str) -> dict[str, str]:
    """`show`'s lines as {label: value}, checking every value starts in one column."""
    lines = out.splitlines()
    width = len(lines[0]) - len(lines[0][len("job") :].lstrip())
    found: dict[str, str] = {}
    label = ""
    for line in lines:
        assert line[width - 2 : width] == "  ", line
        assert line[width] != " ", line
        if line[:width].strip():
            label = line[:width].strip()
            found[label] = line[width:]
        else:  # a value's next line
            found[label] += "\n" + line[width:]
    return found


def test_show_prints_a_job_with_its_last_error_and_payload(cli: Cli, scenario: Scenario) -> None:
    """show: one field a line, aligned; times as ages with a UTC timestamp; the payload."""
    result = cli("show", scenario.path, scenario.stuck)
    assert result.code == 0
    shown = fields(result.out)
    assert list(shown) == [
        "job",
        "key",
        "state",
        "attempts",
        "unique",
        "accepted",
        "next retry",
        "last error",
        "payload",
    ]
    assert shown["job"] == str(scenario.stuck)
    assert (shown["key"], shown["state"], shown["attempts"], shown["unique"]) == (
        "a",
        "retrying",
        "1",
        "-",
    )
    assert re.fullmatch(r"\d+s ago \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)", shown["accepted"])
    assert shown["next retry"].startswith("in 11d13h (")
    assert shown["last error"].endswith("Boom: card declined")
    assert shown["payload"] == '"boom"'


def test_show_a_dead_letter_says_when_it_was_discarded(cli: Cli, scenario: Scenario) -> None:
    """A dead letter: state dead, its attempts, when it was discarded, its unique key."""
    shown = fields(cli("show", scenario.path, scenario.poison).out)
    assert (shown["key"], shown["state"], shown["attempts"], shown["unique"]) == (
        "d",
        "dead",
        "1",
        "order-1",
    )
    assert shown["discarded"].endswith("Z)")
    assert "next retry" not in shown
    assert shown["last error"].endswith("PermanentError: malformed entry")
    assert fields(cli("show", scenario.path, scenario.dead).out)["attempts"] == "3"


def test_show_json_is_the_job_object(cli: Cli, scenario: Scenario) -> None:
    """--json: every JobInfo field and the steps it recorded; the payload as UTF-8 text, flagged so."""
    result = cli("show", scenario.path, scenario.stuck, "--json")
    assert result.code == 0
    shown = json.loads(result.out)
    info = SQLiteReader(scenario.path).job(scenario.stuck)
    assert info is not None
    assert shown.pop("steps") == []
    assert shown == job_json(info)
    assert set(shown) == {
        "id",
        "key",
        "state",
        "attempts",
        "unique",
        "accepted_at",
        "finished_at",
        "last_error",
        "retry_at",
        "stopped_during",
        "place",
        "due_at",
        "trace",
        "data",
        "data_encoding",
    }
    assert (shown["data"], shown["data_encoding"]) == ('"boom"', "utf-8")


def test_a_payload_that_is_not_utf8_is_shown_in_base64(cli: Cli, tmp_path: Path) -> None:
    """Bytes that do not decode: base64, flagged "base64" in JSON and in the human view."""
    path = tmp_path / "raw.db"
    [job_id] = build_dead(path, [b"\xff\x00raw"])
    shown = json.loads(cli("show", path, job_id, "--json").out)
    assert (shown["data"], shown["data_encoding"]) == (
        base64.b64encode(b"\xff\x00raw").decode(),
        "base64",
    )
    human = fields(cli("show", path, job_id).out)
    assert human["payload"] == f"(base64, not UTF-8) {shown['data']}"


def test_show_escapes_control_characters(cli: Cli, tmp_path: Path) -> None:
    """A payload's escape sequences cannot reach the terminal raw."""
    path = tmp_path / "raw.db"
    [job_id] = build_dead(path, [b"\x1b[31mred\x1b[0m"])
    assert fields(cli("show", path, job_id).out)["payload"] == "\\x1b[31mred\\x1b[0m"


def test_show_of_a_job_that_is_not_there_is_exit_1(cli: Cli, scenario: Scenario) -> None:
    """A completed job (forgotten) or an id never used: nothing matched."""
    for job_id in (scenario.done, 999):
        result = cli("show", scenario.path, job_id)
        assert (result.code, result.out) == (1, "")
        assert result.err == f"inturn: no unfinished job or dead letter has id {job_id}\n"
        assert cli("show", scenario.path, job_id, "--json").out == ""


# -- dead -----------------------------------------------------------------------------


def test_dead_lists_the_dead_letters_oldest_first(cli: Cli, scenario: Scenario) -> None:
    """dead: id, key, attempts, when accepted and discarded, the last error's first line."""
    result = cli("dead", scenario.path)
    assert result.code == 0
    assert rows(result.out)[0] == ["ID", "KEY", "ATTEMPTS", "ACCEPTED", "DISCARDED", "LAST ERROR"]
    assert column(result.out, "ID") == [str(scenario.dead), str(scenario.poison)]
    assert column(result.out, "KEY") == ["c", "d"]
    assert column(result.out, "ATTEMPTS") == ["3", "1"]
    assert all(age.endswith("s ago") for age in column(result.out, "DISCARDED"))
    errors = column(result.out, "LAST ERROR")
    assert errors[0].endswith("Boom: card declined")
    assert errors[1].endswith("PermanentError: malformed entry")


def test_dead_key_keeps_one_keys_dead_letters(cli: Cli, scenario: Scenario) -> None:
    """--key K: only K's; a key with none is exit 1."""
    assert column(cli("dead", scenario.path, "--key", "d").out, "ID") == [str(scenario.poison)]
    result = cli("dead", scenario.path, "--key", "a")
    assert (result.code, result.out, result.err) == (1, "", "inturn: no dead letters of key 'a'\n")


def test_dead_json_is_a_list_of_job_objects(cli: Cli, scenario: Scenario) -> None:
    """--json: JobInfo objects, the same the reader returns."""
    result = cli("dead", scenario.path, "--json")
    assert result.code == 0
    reader = SQLiteReader(scenario.path)
    assert json.loads(result.out) == [job_json(info) for info in reader.dead_letters()]


def test_dead_limit_and_none(cli: Cli, tmp_path: Path) -> None:
    """--limit N shows the first N (a note says there are more); none at all is exit 1."""
    path = tmp_path / "raw.db"
    ids = build_dead(path, [b"%d" % n for n in range(5)])
    result = cli("dead", path, "--limit", "3")
    assert column(result.out, "ID") == [str(job_id) for job_id in ids[:3]]
    assert result.err == "inturn: showing the first 3 dead letters; --limit N shows more\n"
    assert cli("purge", path, "--dead", "--older-than", "0s").code == 0
    result = cli("dead", path)
    assert (result.code, result.err) == (1, "inturn: no dead letters\n")
    assert json.loads(cli("dead", path, "--json").out) == []


# -- while a supervisor runs --------------------------------------------------------


async def test_reads_work_while_a_supervisor_holds_the_file(cli: Cli, scenario: Scenario) -> None:
    """The read commands take no lock: they read a held journal as it is."""
    journal = inturn.SQLiteJournal(scenario.path)
    await journal.open()
    try:
        for argv in (
            ["status"],
            ["keys"],
            ["keys", "--blocked"],
            ["show", scenario.stuck],
            ["dead"],
        ):
            result = cli(argv[0], scenario.path, *argv[1:])
            assert result.code == 0, (argv, result)
    finally:
        await journal.aclose()
