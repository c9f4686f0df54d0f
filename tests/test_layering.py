"""The pure modules import no trio, no clock, no RNG, no I/O (STYLE.md 11.1 and 11.11).

Checked on the source text, so a forbidden import inside a function counts too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import inturn

PACKAGE = Path(inturn.__file__).parent

PURE = [
    "errors",
    "keys",
    "jobs",
    "retry",
    "codec",
    "core",
    "_core_state",
    "_core_paging",
    "_core_attempts",
    "_core_operators",
    "_entries",
    "info",
    "journal.records",
    "journal._reads",
    "journal._rules",
    "journal._recovery",
    "_core_recurring",
    "_checks",
]
"""The values-and-rules row and the decisions row of the layering table."""

FORBIDDEN = {"trio", "structlog", "time", "random", "asyncio", "sqlite3", "threading", "psycopg"}


def imported_modules(module: str) -> set[str]:
    """Every module *module* imports, as absolute dotted names."""
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    package = ["inturn", *module.split(".")[:-1]]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                found.add(node.module)
            else:
                base = ".".join(package[: len(package) - (node.level - 1)])
                if node.module is None:  # from . import errors
                    found.update(f"{base}.{alias.name}" for alias in node.names)
                else:
                    found.add(f"{base}.{node.module}")
    return found


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_nothing_impure(module: str) -> None:
    """A pure module imports none of trio, structlog, time, random, asyncio, sqlite3, threading, psycopg."""
    bad = {name for name in imported_modules(module) if name.split(".")[0] in FORBIDDEN}
    assert bad == set()


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_only_pure_inturn_modules(module: str) -> None:
    """Inside inturn, a pure module imports only other pure modules (not the trio shell)."""
    internal = {name for name in imported_modules(module) if name.split(".")[0] == "inturn"}
    assert internal <= {f"inturn.{name}" for name in PURE}


def test_the_check_sees_relative_and_absolute_imports() -> None:
    """The import scanner resolves relative imports, so the checks above can fail."""
    assert "inturn.journal.records" in imported_modules("core")
    assert "inturn.errors" in imported_modules("keys")
    assert "attrs" in imported_modules("jobs")
    assert "trio" in imported_modules("journal.memory")


def test_importing_inturn_loads_no_test_tooling_and_no_postgres_driver() -> None:
    """`trio.testing` imports pytest where it is installed: two thirds of ``import inturn``'s
    time, and 12,000 objects more for every full collection to walk; psycopg is an extra."""
    code = (
        "import sys, inturn\n"
        "heavy = ('pytest', '_pytest', 'hypothesis', 'psycopg', 'trio.testing')\n"
        "print([m for m in sys.modules if m.startswith(heavy)])\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert loaded.strip() == "[]"
