"""The dashboard's JSON API, in process: reads, fixes, and the rules every answer keeps."""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inturn.journal import SQLiteReader
from inturn.web import create_app

from .conftest import HOSTILE, TOKEN, bearer, source


@pytest.fixture
async def client(journal_file: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(source(journal_file), allow_fixes=True, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client


async def get(client: httpx.AsyncClient, url: str, status: int = 200) -> Any:
    response = await client.get(url)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    return response.json()


async def test_the_reads_show_keys_jobs_dead_letters_and_scheduled_jobs(
    client: httpx.AsyncClient,
) -> None:
    [acct] = (await get(client, "/api/keys"))["keys"]
    assert (acct["key"], acct["halted"], acct["queued"]) == ("acct", True, 1)
    [dead] = (await get(client, "/api/dead"))["dead"]
    assert dead["last_error"] == "inturn.errors.PermanentError: declined: card 4111"
    queue = (await get(client, "/api/keys/acct"))["jobs"]
    assert [job["state"] for job in queue] == ["queued"]
    [scheduled] = (await get(client, "/api/scheduled"))["scheduled"]
    assert scheduled["key"] == HOSTILE
    job = await get(client, f"/api/jobs/{queue[0]['id']}")
    assert job["job"]["id"] == queue[0]["id"]


async def test_payloads_are_never_returned_unless_asked_for(journal_file: Path) -> None:
    """Their size only; with show_payloads, the data too."""
    for show in (False, True):
        app = create_app(source(journal_file), show_payloads=show)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client:
            response = await client.get("/api/keys/acct")
        [job] = response.json()["jobs"]
        assert job["size"] == len(b'{"secret":"hunter2"}')
        assert ("hunter2" in response.text) is show


async def test_a_fix_needs_fixes_allowed_and_the_token(journal_file: Path) -> None:
    [dead] = SQLiteReader(journal_file).dead_letters()
    read_only = create_app(source(journal_file))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=read_only), base_url="http://127.0.0.1"
    ) as client:
        refused = await client.post(f"/api/jobs/{dead.id}/requeue", headers=bearer(TOKEN))
        assert refused.status_code == 403
        assert "--allow-fixes" in refused.json()["error"]["message"]
    app = create_app(source(journal_file), allow_fixes=True, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        for headers in ({}, bearer("wrong"), {"authorization": TOKEN}):
            answer = await client.post(f"/api/jobs/{dead.id}/requeue", headers=headers)
            assert answer.status_code == 403, headers
        assert (await client.get(f"/api/jobs/{dead.id}/requeue")).status_code == 405
        assert SQLiteReader(journal_file).dead_letters() == [dead]  # nothing changed
        done = await client.post(f"/api/jobs/{dead.id}/requeue?head=true", headers=bearer(TOKEN))
        assert done.status_code == 200, done.text
        assert done.json() == {"outcome": "done", "job": dead.id, "from": dead.id}
    assert SQLiteReader(journal_file).dead_letters() == []


async def test_every_fix_reaches_the_journal(client: httpx.AsyncClient, journal_file: Path) -> None:
    reader = SQLiteReader(journal_file)
    [dead] = reader.dead_letters()
    [queued] = reader.jobs("acct")

    async def post(url: str) -> Any:
        response = await client.post(url, headers=bearer(TOKEN))
        assert response.status_code == 200, response.text
        return response.json()

    assert await post("/api/keys/acct/resume") == {"outcome": "done", "key": "acct"}
    assert not reader.keys(now=0.0)[0].halted
    assert await post("/api/keys/acct/pause") == {"outcome": "done", "key": "acct"}
    assert reader.keys(now=0.0)[0].halted
    assert (await post("/api/keys/acct/retry-now"))["key"] == "acct"
    assert await post(f"/api/jobs/{queued.id}/skip") == {"outcome": "done", "job": queued.id}
    assert (await post("/api/dead/purge?older_than=0"))["purged"] == 2
    assert reader.dead_letters() == []
    assert (await client.post(f"/api/jobs/{dead.id}/skip", headers=bearer(TOKEN))).json()["error"][
        "type"
    ] == "JobNotFound"


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/keys?limit=0", 400),
        ("/api/keys?limit=99999999999999999999999", 400),
        ("/api/keys?limit=-1", 400),
        ("/api/keys?state=sleeping", 400),
        ("/api/jobs/abc", 400),
        ("/api/jobs/0", 400),
        ("/api/jobs/99999999999999999999", 400),
        ("/api/jobs/424242", 404),
        ("/api/keys/" + "k" * 5_000, 400),
        ("/api/dead?after=x", 400),
        ("/api/audit?before=-3", 400),
        ("/api/audit?limit=1001", 400),
        ("/api/nothing", 404),
    ],
)
async def test_hostile_input_gets_a_4xx_with_a_json_error(
    client: httpx.AsyncClient, url: str, status: int
) -> None:
    answer = await get(client, url, status)
    assert set(answer["error"]) == {"type", "message"}
    assert "Traceback" not in answer["error"]["message"]


@pytest.mark.parametrize(
    "url", ["/api/dead/purge?older_than=-1", "/api/dead/purge?older_than=nan", "/api/dead/purge"]
)
async def test_a_bad_fix_changes_nothing(
    client: httpx.AsyncClient, journal_file: Path, url: str
) -> None:
    response = await client.post(url, headers=bearer(TOKEN))
    assert response.status_code == 400
    assert len(SQLiteReader(journal_file).dead_letters()) == 1


async def test_a_hostile_key_comes_back_as_data(client: httpx.AsyncClient) -> None:
    """A key is a path segment, URL-encoded, and comes back as a JSON string."""
    answer = await get(client, "/api/keys/" + urllib.parse.quote(HOSTILE, safe=""))
    assert answer == {"key": HOSTILE, "jobs": []}
    assert (await get(client, "/api/scheduled"))["scheduled"][0]["key"] == HOSTILE


def test_fixes_need_a_token() -> None:
    with pytest.raises(ValueError, match="token"):
        create_app(source(Path("nowhere.db")), allow_fixes=True)
