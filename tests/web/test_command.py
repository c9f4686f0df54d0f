"""``inturn web``, as a real process: it serves the API, and refuses to start unsafely."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import trio

import inturn

TOKEN = "t0ken"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_journal(path: Path) -> None:
    async def fill() -> None:
        async def hold(job: inturn.Job) -> None:
            await trio.sleep_forever()

        async with inturn.open_supervisor(hold, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send("acct", 1)
            await sup.shutdown(grace=0)

    trio.run(fill)


def test_it_serves_the_api_and_takes_a_fix_with_the_token(tmp_path: Path) -> None:
    path, token_file = tmp_path / "jobs.db", tmp_path / "token"
    make_journal(path)
    token_file.write_text(f"{TOKEN}\n")
    port = free_port()
    command = [sys.executable, "-m", "inturn", "web", str(path), "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--allow-fixes", "--token-file", str(token_file)],
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        keys: list[dict[str, object]] = []
        while True:  # the process starts and binds: no event to wait on across a process
            try:
                keys = httpx.get(f"{base}/api/keys", timeout=5).json()["keys"]
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "inturn web did not answer in 30 s"
                time.sleep(0.05)
        assert [key["key"] for key in keys] == ["acct"]
        refused = httpx.post(f"{base}/api/keys/acct/pause", timeout=5)
        assert refused.status_code == 403
        paused = httpx.post(
            f"{base}/api/keys/acct/pause", headers={"authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        assert paused.json() == {"outcome": "done", "key": "acct"}
        assert httpx.get(f"{base}/api/keys?state=halted", timeout=5).json()["keys"][0]["halted"]
    finally:
        server.kill()
        server.wait()
        if server.stderr is not None:
            server.stderr.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to serve on 0.0.0.0 without a token"),
        (["--allow-fixes"], "--allow-fixes needs a token"),
    ],
)
def test_it_refuses_to_start_unsafely(
    tmp_path: Path, arguments: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.db"
    make_journal(path)
    monkeypatch.delenv("INTURN_WEB_TOKEN", raising=False)
    done = subprocess.run(
        [sys.executable, "-m", "inturn", "web", str(path), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
