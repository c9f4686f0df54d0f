"""`keys_by_name` for the SQL journals: pages of keys in code-point order, from small indexes.

A dashboard lists keys by name, filtered by state, a page at a time (never
OFFSET: each page starts after the last key of the one before).  Walking
every key to find the few that are blocked would read the whole journal;
instead each filter names the *sources* its keys can come from, each an
index ordered by key that a dialect reads as a range:

- ``jobs``: keys with unfinished jobs in their sequence (the queued-by-key
  index, about as many entries as jobs);
- ``started``: keys with a job an attempt started (running or retrying: a
  partial index of few entries where most jobs wait);
- ``halted``, ``paused``: halted keys (the halts' primary key), paused ones only.

A page merges its sources' next keys, reads those keys' `KeyInfo` in one
query, and keeps the ones `key_matches` passes (the one rule: a source only
narrows where to look), until *limit* are found or the sources run dry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, TypeAlias

from ..info import KeyFilter, KeyInfo
from ._reads import key_matches, prefix_end

__all__ = ["Range", "Source", "SOURCES", "page_keys"]

Source: TypeAlias = Literal["jobs", "started", "halted", "paused"]

SOURCES: Final[dict[KeyFilter | None, tuple[Source, ...]]] = {
    None: ("jobs", "halted"),
    "waiting": ("jobs",),
    "running": ("started",),
    "retrying": ("started",),
    "blocked": ("started", "halted"),
    "halted": ("halted",),
    "paused": ("paused",),
}
"""Where the keys each filter passes can come from: every key it passes is in one of them."""

_CHUNK_MIN: Final = 64
_CHUNK_MAX: Final = 500


class Range:
    """Keys from *low* (included with *inclusive*, else above it) up to *end* (excluded;
    None: no bound), in code-point order."""

    __slots__ = ("end", "inclusive", "low")

    def __init__(self, low: str, inclusive: bool, end: str | None) -> None:
        self.low, self.inclusive, self.end = low, inclusive, end

    def where(self, column: str, mark: str) -> tuple[str, list[object]]:
        """The range as SQL over *column* (placeholders *mark*), and its parameters."""
        where = f"{column} {'>=' if self.inclusive else '>'} {mark}"
        parameters: list[object] = [self.low]
        if self.end is not None:
            where += f" AND {column} < {mark}"
            parameters.append(self.end)
        return where, parameters


def page_keys(
    names: Callable[[Source, Range, int], list[str]],
    infos: Callable[[list[str]], dict[str, KeyInfo]],
    *,
    state: KeyFilter | None,
    prefix: str,
    after: str | None,
    limit: int,
) -> list[KeyInfo]:
    """Up to *limit* keys that pass *state*, start with *prefix* and sort above *after*, in order.

    *names* reads a source's first keys in a range, in order, at most as many
    as asked; *infos* the `KeyInfo` of each key given that has unfinished jobs
    or is halted (a dialect reads both in one snapshot).
    """
    end = prefix_end(prefix)
    low, inclusive = (prefix, True) if after is None or after < prefix else (after, False)
    sources = SOURCES[state]
    chunk = min(max(2 * limit, _CHUNK_MIN), _CHUNK_MAX)
    found: list[KeyInfo] = []
    while sources and len(found) < limit:
        span = Range(low, inclusive, end)
        read = {source: names(source, span, chunk) for source in sources}
        # Keys up to the lowest last key of a full read are all known; past it, not yet.
        full = [keys[-1] for keys in read.values() if len(keys) >= chunk]
        known = min(full) if full else None
        page = sorted(
            {key for keys in read.values() for key in keys if known is None or key <= known}
        )
        if not page:
            break
        known_infos = infos(page)
        for info in (known_infos[key] for key in page if key in known_infos):
            if key_matches(state, info.head_state, info.halted, info.halted_by is None):
                found.append(info)
                if len(found) >= limit:
                    break
        if known is None:
            break  # every source read to the end of the range
        low, inclusive = known, False
    return found
