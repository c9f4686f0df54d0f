"""The dashboard in a real browser: Playwright driving Debian's Chromium, against ``inturn
web`` on a journal that a real service runs in another process.

Chromium is launched by its path (browsers cannot be downloaded here); `.ci/run`
installs Debian's package when it is missing.  Screenshots of each page land in
the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, expect, sync_playwright

from inturn.journal import SQLiteReader

from .service import HOSTILE
from .test_command import free_port

TOKEN = "br0wser-token"
CHROMIUM = shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium; the tests skip without it, but fail under CI, which must have it."""
    if CHROMIUM is None:
        why = "no chromium on the PATH (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Path]:
    """A service running the journal at the path yielded, in another process."""
    path = tmp_path / "jobs.db"
    running = subprocess.Popen(
        [sys.executable, "-m", "tests.web.service", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert running.stdout is not None
        assert running.stdout.readline() == "ready\n"
        yield path
    finally:
        running.kill()
        running.wait()
        if running.stdout is not None:
            running.stdout.close()


def dashboard(path: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """``inturn web`` on *path*, once it answers; and its address."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "inturn", "web", str(path), "--port", str(port), *options]
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # the process starts and binds: no event to wait on across a process
        try:
            httpx.get(f"{base}/api/overview", timeout=5)
            return server, base
        except httpx.TransportError:
            assert server.poll() is None, "inturn web stopped"
            assert time.monotonic() < deadline, "inturn web did not answer in 30 s"
            time.sleep(0.05)


def settled(path: Path) -> dict[str, str]:
    """The keys' head states once the service has tried each key's head."""
    deadline = time.monotonic() + 30
    while True:  # the service runs in another process: its progress is read back
        keys = {info.key: info for info in SQLiteReader(path).keys(now=time.time())}
        states = {
            key: "halted" if info.halted else str(info.head_state) for key, info in keys.items()
        }
        if states == {"stuck": "retrying", "halted": "halted", HOSTILE: "running"}:
            return states
        assert time.monotonic() < deadline, f"the service did not settle: {states}"
        time.sleep(0.05)


class Watched:
    """A page with its console errors and any dialog a script opened recorded; a fix's
    confirmation is accepted."""

    def __init__(self, browser: Browser) -> None:
        self.page: Page = browser.new_page()
        self.errors: list[str] = []
        self.alerts: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("dialog", self._dialog)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _dialog(self, dialog: Dialog) -> None:
        if dialog.type == "confirm":
            dialog.accept()
        else:
            self.alerts.append(dialog.message)
            dialog.dismiss()


def test_the_pages_show_every_key_and_a_skip_lets_the_next_job_run(
    browser: Browser, service: Path, tmp_path: Path
) -> None:
    settled(service)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server, base = dashboard(service, "--allow-fixes", "--token-file", str(token_file))
    watched = Watched(browser)
    page = watched.page
    try:
        page.goto(f"{base}/")
        expect(page.locator("#count-halted")).to_have_text("1")
        expect(page.locator("#count-retrying")).to_have_text("1")
        page.screenshot(path=tmp_path / "overview.png", full_page=True)

        page.goto(f"{base}/keys?state=blocked")
        rows = page.locator("#keys tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.filter(has_text="halted")).to_contain_text(
            re.compile(r"halted by job \d+: inturn.errors.PermanentError: declined: card 4111")
        )
        expect(rows.filter(has_text="stuck")).to_contain_text("after: TimeoutError")
        page.screenshot(path=tmp_path / "keys.png", full_page=True)

        page.goto(f"{base}/keys")
        expect(page.get_by_role("link", name=HOSTILE, exact=True)).to_be_visible()
        page.get_by_role("link", name=HOSTILE, exact=True).click()
        expect(page.locator("h1")).to_have_text(f"Key {HOSTILE}")

        page.goto(f"{base}/login")
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()

        [head, behind] = SQLiteReader(service).jobs("stuck")
        page.goto(f"{base}/key?key=stuck")
        expect(page.locator("#reason")).to_contain_text(f"retrying job {head.id} at")
        page.evaluate("window.notReloaded = true")
        page.get_by_role("button", name=f"Skip job {head.id}").click()
        expect(page.locator("#outcome")).to_have_text("Done.")
        expect(page.locator("#reason")).to_contain_text(
            f"running job {behind.id} (attempt 1", timeout=15_000
        )
        assert page.evaluate("window.notReloaded") is True  # live: no reload
        page.screenshot(path=tmp_path / "key.png", full_page=True)

        for url in ("/dead", "/scheduled", "/audit", f"/jobs/{head.id}"):
            page.goto(base + url)
            expect(page.locator("main")).to_be_visible()
            page.screenshot(path=tmp_path / f"{url.strip('/').replace('/', '-')}.png")
        expect(page.locator("main")).to_contain_text("skipped by operator")

        assert watched.errors == []
        assert watched.alerts == []  # the hostile key ran no script
    finally:
        page.close()
        server.kill()
        server.wait()


def test_without_fixes_allowed_there_is_no_button_and_the_api_refuses(
    browser: Browser, service: Path
) -> None:
    settled(service)
    server, base = dashboard(service)
    watched = Watched(browser)
    page = watched.page
    try:
        page.goto(f"{base}/key?key=stuck")
        expect(page.locator("#reason")).to_contain_text("retrying job")
        expect(page.get_by_role("button")).to_have_count(0)
        expect(page.get_by_text("read-only")).to_be_visible()
        head = SQLiteReader(service).jobs("stuck")[0]
        refused = httpx.post(f"{base}/api/jobs/{head.id}/skip", timeout=10)
        assert refused.status_code == 403
        assert "--allow-fixes" in refused.json()["error"]["message"]
        assert SQLiteReader(service).jobs("stuck")[0] == head
        assert watched.errors == []
    finally:
        page.close()
        server.kill()
        server.wait()
