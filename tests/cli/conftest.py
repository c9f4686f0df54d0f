from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from inturn.cli import main

from .scenario import Scenario, build


@attrs.frozen
class Result:
    """What one run of the command line printed, and its exit status."""

    code: int
    out: str
    err: str


class Cli:
    """Runs ``main`` in this process, capturing what it prints."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: object) -> Result:
        self.capsys.readouterr()  # what came before is not this run's
        code = main([str(arg) for arg in argv])
        out, err = self.capsys.readouterr()
        if code == 0:
            assert "Traceback" not in err
        else:  # a failure is one line on stderr, never a traceback
            assert err.endswith("\n"), err
            assert err.startswith("inturn: "), err
            assert "Traceback" not in err
        return Result(code, out, err)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return build(tmp_path / "jobs.db")


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, ...]:
    """The journal, as the command line names it: a file, or a URI and its schema."""
    if request.param == "sqlite":
        return (str(tmp_path / "jobs.db"),)
    return (request.getfixturevalue("pg_dsn"), "--schema", request.getfixturevalue("pg_schema"))
