"""The dashboard's pages, in process: what each shows, escaping, signing in, CSRF, live parts."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

import inturn
from inturn.journal import SQLiteReader
from inturn.web import create_app

from .conftest import HOSTILE, TOKEN, source


@pytest.fixture
async def pages_file(journal_file: Path) -> Path:
    """The shared file, with a job queued on the hostile key too."""
    async with inturn.operate(inturn.SQLiteJournal(journal_file)) as operator:
        await operator.send(HOSTILE, "y")
    return journal_file


def client_of(path: Path, **options: object) -> httpx.AsyncClient:
    app = create_app(source(path), **options)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture
async def fixing(pages_file: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(pages_file, allow_fixes=True, token=TOKEN) as client:
        yield client


async def page(client: httpx.AsyncClient, url: str, status: int = 200) -> str:
    response = await client.get(url)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    return response.text


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, "no CSRF token on the page"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    return await client.post("/login", data={"token": token})


async def test_the_overview_counts_keys_and_jobs_by_state(pages_file: Path) -> None:
    async with client_of(pages_file) as client:
        html = await page(client, "/")
    assert '<span id="count-halted">1</span>' in html
    assert '<span id="count-waiting">1</span>' in html  # the hostile key's queued job
    assert '<span id="count-scheduled">1</span>' in html
    assert '<span id="count-dead">1</span>' in html
    assert "Finished per minute" in html


async def test_the_keys_page_says_why_each_key_is_not_running(pages_file: Path) -> None:
    [dead] = SQLiteReader(pages_file).dead_letters()
    async with client_of(pages_file) as client:
        html = await page(client, "/keys?state=blocked")
        assert f"halted by job {dead.id}: inturn.errors.PermanentError: declined: card 4111" in html
        assert "acct" in html
        assert "waiting for a slot" not in html  # the hostile key is not blocked
        every = await page(client, "/keys")
        assert "waiting for a slot: job" in every
        found = await page(client, "/keys?prefix=ac")
        assert ">acct</a>" in found
        assert "No keys" in await page(client, "/keys?prefix=zz")
        assert "No keys" in await page(client, "/keys?after=acct&prefix=ac")


async def test_a_hostile_key_is_shown_as_text(pages_file: Path) -> None:
    async with client_of(pages_file) as client:
        for url in ("/keys", "/key?key=" + urllib.parse.quote(HOSTILE), "/scheduled"):
            html = await page(client, url)
            assert "<script>alert" not in html, url
            assert "<img src=x" not in html, url
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url


async def test_the_key_page_shows_the_queue_in_order_and_the_halt(pages_file: Path) -> None:
    [queued] = SQLiteReader(pages_file).jobs("acct")
    async with client_of(pages_file) as client:
        html = await page(client, "/key?key=acct")
    assert f'href="/jobs/{queued.id}"' in html
    assert 'id="reason">halted by job' in html
    assert "<form" not in html.split("<main", 1)[1]  # read-only: no buttons


async def test_the_job_page_hides_the_payload_unless_asked(pages_file: Path) -> None:
    [queued] = SQLiteReader(pages_file).jobs("acct")
    async with client_of(pages_file) as client:
        html = await page(client, f"/jobs/{queued.id}")
        assert "hunter2" not in html
        assert "20 bytes, text" in html
        assert "No unfinished job or dead letter 4242" in await page(client, "/jobs/4242", 404)
    async with client_of(pages_file, show_payloads=True) as client:
        assert "hunter2" in await page(client, f"/jobs/{queued.id}")


@pytest.mark.parametrize(
    ("url", "status"),
    [("/key", 400), ("/jobs/abc", 400), ("/keys?state=asleep", 400), ("/dead?older_than=3x", 400)],
)
async def test_bad_input_gets_an_error_page(pages_file: Path, url: str, status: int) -> None:
    async with client_of(pages_file) as client:
        html = await page(client, url, status)
    assert f"{status} ValueError" in html
    assert "Traceback" not in html


async def test_the_live_part_comes_alone(pages_file: Path) -> None:
    async with client_of(pages_file) as client:
        response = await client.get("/keys", headers={"x-inturn-live": "1"})
    assert response.status_code == 200
    assert "<html" not in response.text
    assert "<table" in response.text


async def test_signing_in_shows_the_fixes_and_a_fix_needs_the_csrf_token(
    fixing: httpx.AsyncClient, pages_file: Path
) -> None:
    assert "Sign in to make fixes" in await page(fixing, "/key?key=acct")
    assert (await sign_in(fixing, "wrong")).status_code == 403
    assert "inturn_session" not in fixing.cookies
    assert (await sign_in(fixing)).status_code == 303
    html = await page(fixing, "/key?key=acct")
    assert "Resume" in html
    csrf = csrf_of(html)
    refused = await fixing.post("/api/keys/acct/resume")  # the session alone is not enough
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]
    wrong = await fixing.post("/api/keys/acct/resume", headers={"x-csrf-token": "0" * 64})
    assert wrong.status_code == 403
    assert SQLiteReader(pages_file).keys(now=0.0)[0].halted  # nothing changed
    done = await fixing.post("/api/keys/acct/resume", data={"csrf": csrf})  # a form, no script
    assert done.json() == {"outcome": "done", "key": "acct"}
    assert not SQLiteReader(pages_file).keys(now=0.0)[0].halted
    [entry] = SQLiteReader(pages_file).audit()
    assert (entry.verb, entry.actor) == ("resume", "web@127.0.0.1")


async def test_a_session_cookie_from_another_token_is_refused(pages_file: Path) -> None:
    async with client_of(pages_file, allow_fixes=True, token="other") as other:
        await sign_in(other, "other")
        cookie = other.cookies["inturn_session"]
    async with client_of(pages_file, allow_fixes=True, token=TOKEN) as client:
        client.cookies.set("inturn_session", cookie)
        html = await page(client, "/key?key=acct")
        assert "Sign in to make fixes" in html


async def test_signing_out_needs_the_csrf_token_and_forgets_the_session(
    fixing: httpx.AsyncClient,
) -> None:
    await sign_in(fixing)
    csrf = csrf_of(await page(fixing, "/"))
    assert (await fixing.post("/logout")).status_code == 403
    assert (await fixing.post("/logout", data={"csrf": csrf})).status_code == 303
    assert "Sign in to make fixes" in await page(fixing, "/")


async def test_a_huge_form_is_refused_unread(fixing: httpx.AsyncClient) -> None:
    response = await fixing.post(
        "/api/keys/acct/pause",
        content=b"csrf=" + b"a" * 1_000_000,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "ValueError"


async def test_embedded_in_an_application_it_serves_the_supervisors_journal() -> None:
    """``nursery.start(inturn.web.serve, sup)`` listens, reads the journal the supervisor
    holds, and its fixes are the supervisor's own."""
    from inturn.web import serve

    started = trio.Event()

    async def hold(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    async with (
        inturn.open_supervisor(hold, journal=inturn.MemoryJournal()) as sup,
        trio.open_nursery() as nursery,
    ):
        await sup.send("acct", 1)
        second = await sup.send("acct", 2)
        await started.wait()
        [address] = await nursery.start(
            lambda task_status: serve(
                sup, port=0, allow_fixes=True, token=TOKEN, task_status=task_status
            )
        )
        async with httpx.AsyncClient(base_url=address) as client:
            keys = (await client.get("/api/keys")).json()["keys"]
            assert [(k["key"], k["queued"]) for k in keys] == [("acct", 2)]
            assert "running job" in (await client.get("/keys")).text
            paused = await client.post(
                "/api/keys/acct/pause", headers={"authorization": f"Bearer {TOKEN}"}
            )
            assert paused.json() == {"outcome": "done", "key": "acct"}
        [info] = await sup.keys()
        assert info.halted
        assert [job.id for job in await sup.jobs("acct")][1] == second
        await sup.shutdown(grace=0)
        nursery.cancel_scope.cancel()


async def test_mounted_under_a_path_its_links_and_errors_keep_it(pages_file: Path) -> None:
    """An application may mount the dashboard under a path of its own."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    outer = Starlette(routes=[Mount("/ops", app=create_app(source(pages_file)))])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=outer), base_url="http://127.0.0.1"
    ) as client:
        html = (await client.get("/ops/keys")).text
        assert 'href="/ops/key?key=acct"' in html
        assert 'src="/ops/static/app.js"' in html
        assert (await client.get("/ops/static/app.js")).status_code == 200
        refused = await client.get("/ops/api/jobs/abc")
        assert refused.json()["error"]["type"] == "ValueError"


async def test_recurring_schedules_are_listed_and_paused_from_the_page(
    fixing: httpx.AsyncClient, pages_file: Path
) -> None:
    async def never(job: inturn.Job) -> None:
        raise AssertionError("nothing runs here")

    async with inturn.open_supervisor(never, journal=inturn.SQLiteJournal(pages_file)) as sup:
        await sup.schedule("close-day", "acct", "close", cron="0 2 * * *", tz="Europe/Paris")
        await sup.schedule(HOSTILE, None, "x", every=3600)
        await sup.shutdown(grace=0)
    [hostile, listed] = (await fixing.get("/api/schedules")).json()["schedules"]  # by name
    assert (listed["name"], listed["paused"]) == ("close-day", False)
    assert hostile["name"] == HOSTILE
    html = await page(fixing, "/scheduled")
    assert "cron &#39;0 2 * * *&#39; Europe/Paris" in html
    assert "<script>alert" not in html
    await sign_in(fixing)
    csrf = csrf_of(await page(fixing, "/scheduled"))
    done = await fixing.post("/api/schedules/close-day/pause", data={"csrf": csrf})
    assert done.json() == {"outcome": "done", "schedule": "close-day"}
    assert ">paused<" in await page(fixing, "/scheduled")
    gone = await fixing.post("/api/schedules/nothing/unschedule", data={"csrf": csrf})
    assert (gone.status_code, gone.json()["error"]["type"]) == (404, "ScheduleNotFound")


async def test_the_job_page_shows_the_trace_it_was_sent_in(tmp_path: Path) -> None:
    from inturn.journal import Append

    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    path = tmp_path / "traced.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b'"x"', trace=f"{parent} vendor=7")])
    await journal.aclose()
    async with client_of(path) as client:
        html = await page(client, "/jobs/1")
    assert f"<code>{parent}</code> (traceparent)" in html
