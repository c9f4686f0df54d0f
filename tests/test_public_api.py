"""``inturn.__all__`` is the contract: what it names exists, and errors form one tree."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import inturn

ROOT = Path(__file__).resolve().parents[1]

ERRORS = [
    inturn.InvalidKey,
    inturn.DuplicateError,
    inturn.JobDiscarded,
    inturn.PermanentError,
    inturn.RetryAfter,
    inturn.Snooze,
    inturn.BatchError,
    inturn.EncodeError,
    inturn.DecodeError,
    inturn.SupervisorClosed,
    inturn.JournalError,
    inturn.JournalCorrupt,
    inturn.JournalLocked,
    inturn.LeaseLost,
    inturn.JournalGone,
    inturn.JobNotFound,
    inturn.KeyNotFound,
    inturn.JobStateError,
    inturn.InvalidSchedule,
    inturn.ScheduleNotFound,
]

CONTRACT = {
    # the names the core-runtime issue promises
    "open_supervisor",
    "Job",
    "Stats",
    "Retry",
    "Journal",
    "MemoryJournal",
    "JSONCodec",
    "InturnError",
    "InvalidKey",
    "DuplicateError",
    "JobDiscarded",
    "PermanentError",
    "EncodeError",
    "SupervisorClosed",
}


@pytest.mark.parametrize("name", inturn.__all__)
def test_every_exported_name_exists(name: str) -> None:
    """Every name in inturn.__all__ is an attribute of the package."""
    assert getattr(inturn, name, None) is not None


def test_all_has_no_duplicates_or_private_names() -> None:
    """__all__ lists each name once and nothing that starts with "_"."""
    assert len(set(inturn.__all__)) == len(inturn.__all__)
    assert [name for name in inturn.__all__ if name.startswith("_")] == []


def test_all_holds_the_issue_contract() -> None:
    """Every name the issue's API contract uses is exported."""
    assert set(inturn.__all__) >= CONTRACT


def test_every_exported_error_is_listed_here() -> None:
    """Every exception class in __all__ is one this file checks (so a new one gets checked)."""
    exported = {
        getattr(inturn, name)
        for name in inturn.__all__
        if isinstance(getattr(inturn, name), type)
        and issubclass(getattr(inturn, name), BaseException)
    }
    assert exported == {inturn.InturnError, *ERRORS}


@pytest.mark.parametrize("error", ERRORS)
def test_every_error_subclasses_inturn_error(error: type[Exception]) -> None:
    """Every inturn error can be caught with ``except inturn.InturnError``."""
    assert issubclass(error, inturn.InturnError)
    assert issubclass(inturn.InturnError, Exception)


def test_invalid_key_is_a_value_error() -> None:
    """InvalidKey is also a ValueError, so ``except ValueError`` catches a bad key."""
    assert issubclass(inturn.InvalidKey, ValueError)


def test_not_found_errors_are_lookup_errors() -> None:
    """JobNotFound and KeyNotFound are also LookupErrors, like a missing dict key."""
    assert issubclass(inturn.JobNotFound, LookupError)
    assert issubclass(inturn.KeyNotFound, LookupError)


def test_encode_error_is_a_type_error() -> None:
    """EncodeError is also a TypeError, so ``except TypeError`` catches a bad payload."""
    assert issubclass(inturn.EncodeError, TypeError)


def test_decode_error_is_a_value_error() -> None:
    """DecodeError is also a ValueError."""
    assert issubclass(inturn.DecodeError, ValueError)


def test_import_inturn_does_not_import_testing() -> None:
    """``import inturn`` leaves inturn.testing unimported: it is opt-in."""
    code = "import sys, inturn; print('inturn.testing' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_testing_module_is_importable() -> None:
    """inturn.testing exists and offers Recorder."""
    import inturn.testing

    assert "Recorder" in inturn.testing.__all__


def test_importing_inturn_does_not_import_psycopg() -> None:
    """psycopg is an extra: ``import inturn`` (PostgresJournal included) works without it."""
    code = "import sys, inturn; inturn.PostgresJournal('postgresql://'); print('psycopg' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == "False\n"


def test_version_is_the_installed_packages() -> None:
    """``inturn.__version__`` is what the package's metadata says, a release number."""
    assert inturn.__version__ == importlib.metadata.version("inturn")
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", inturn.__version__)


def test_pyproject_reads_the_version_from_the_package() -> None:
    """One literal, ``__version__``: pyproject.toml has the build read it, so the two agree."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"] == {"path": "src/inturn/__init__.py"}
    source = (ROOT / "src" / "inturn" / "__init__.py").read_text(encoding="utf-8")
    assert f'__version__ = "{inturn.__version__}"' in source.splitlines()


def test_the_license_is_mit_as_the_metadata_says() -> None:
    """LICENSE is the MIT license that pyproject.toml declares, and the wheel carries it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the inturn authors\n")
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_classifiers_claim_only_python_versions_it_allows() -> None:
    """Each ``Python :: 3.N`` classifier is at least requires-python's, and 3.11 (CI's) is one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"
    minors = [
        int(match.group(1))
        for classifier in project["classifiers"]
        if (match := re.fullmatch(r"Programming Language :: Python :: 3\.([0-9]+)", classifier))
    ]
    assert min(minors) == 11


def test_inturn_never_configures_structlog() -> None:
    """Logging is the application's: running a supervisor leaves structlog unconfigured."""
    code = """
import structlog, sys, trio, inturn

async def handler(job):
    return job.payload

async def main():
    async with inturn.open_supervisor(handler) as sup:
        await sup.ask("k", 1)

trio.run(main)
print(structlog.is_configured(), file=sys.stderr)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stderr == "False\n"
    assert "job.completed" in result.stdout  # unconfigured structlog prints debug events
