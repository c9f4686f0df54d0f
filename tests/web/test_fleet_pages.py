"""The dashboard on a PostgreSQL fleet: members with their heartbeats, owners on the keys, a fix."""

from __future__ import annotations

import socket

import httpx
import trio

import inturn
from inturn.journal import PostgresReader
from inturn.web import create_app, reader_source

from .conftest import TOKEN, bearer


async def test_a_fleet_shows_its_members_and_each_keys_owner(pg_dsn: str, pg_schema: str) -> None:
    started = trio.Event()

    async def hold(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    def journal() -> inturn.PostgresJournal:
        return inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=True)

    source = reader_source(PostgresReader(pg_dsn, schema=pg_schema), journal, answer_within=10)
    app = create_app(source, allow_fixes=True, token=TOKEN)
    async with (
        inturn.open_supervisor(hold, journal=journal()) as sup,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client,
    ):
        first = await sup.send("acct", 1)
        await sup.send("acct", 2)
        await started.wait()
        name = f"{socket.gethostname()}:"
        overview = (await client.get("/api/overview")).json()
        assert overview["overview"]["running"] == 1
        [member] = overview["members"]
        assert member["name"].startswith(name)
        assert (member["keys"], member["expired"]) == (1, False)
        page = (await client.get("/")).text
        assert "Fleet members" in page
        assert member["name"] in page
        keys = (await client.get("/keys?state=running")).text
        assert f"running job {first} (attempt 1" in keys
        assert f"{member['name']} (heartbeat" in keys
        paused = await client.post("/api/keys/acct/pause", headers=bearer(TOKEN))
        assert paused.json() == {"outcome": "done", "key": "acct"}
        assert "paused by an operator" in (await client.get("/key?key=acct")).text
        [entry] = (await client.get("/api/audit")).json()["audit"]
        assert (entry["verb"], entry["outcome"]) == ("pause", "done")
        await sup.shutdown(grace=0)
