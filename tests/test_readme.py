"""The README's quickstart, followed as a newcomer would: its marked blocks (an HTML
comment `<!-- quickstart -->` before each), run in order in a fresh copy of the
repository, so the README cannot drift from what works.

In a block, a line is a command (its trailing `# comment` dropped); a command whose
comment says it `keeps running` runs in the background, as in another terminal, and a
`# then type in it: TEXT` line is typed into the last of those. What the test changes,
and why, is said where it does it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from progresscast.store.embedded import stop_embedded

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- quickstart -->\s*\n```sh\n(.*?)```", re.S)
TYPED = re.compile(r"^#\s*then type in it:\s*(.+?)\s*$")
COMMENT = re.compile(r"\s+#\s.*$")
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "node_modules"
)
COMMAND_SECONDS = 60.0
READY_SECONDS = 30.0


@dataclass
class Step:
    command: str
    background: bool = False
    typed: list[str] = field(default_factory=list)


def quickstart(readme: str) -> list[list[Step]]:
    """The quickstart's blocks, each a list of its commands."""
    blocks: list[list[Step]] = []
    for body in BLOCK.findall(readme):
        steps: list[Step] = []
        for line in body.splitlines():
            typed = TYPED.match(line.strip())
            if typed:
                steps[-1].typed.append(typed.group(1))
            elif line.strip() and not line.lstrip().startswith("#"):
                comment = COMMENT.search(line)
                background = comment is not None and "keeps running" in comment.group(0)
                steps.append(Step(COMMENT.sub("", line).strip(), background))
        blocks.append(steps)
    return blocks


class Background:
    """A command left running, as in another terminal: its output gathered as it comes."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.command = command
        self.proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.output = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output += line

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def wait_for(self, what: str, ok: Callable[[], bool], seconds: float = READY_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while not ok():
            if self.proc.poll() is not None:
                raise AssertionError(f"`{self.command}` ended ({self.proc.returncode}) before {what}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"`{self.command}`: no {what} within {seconds:.0f} s:\n{self.output}")
            time.sleep(0.05)

    def shows(self, text: str, seconds: float = READY_SECONDS) -> None:
        self.wait_for(repr(text), lambda: text in self.output, seconds)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()



@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh copy of the work tree, without the venv, caches or build output."""
    copy = tmp_path / "progresscast"
    shutil.copytree(ROOT, copy, ignore=LEFT_OUT)
    return copy


@pytest.fixture
def background() -> Iterator[list[Background]]:
    running: list[Background] = []
    yield running
    for one in reversed(running):
        one.stop()


def test_the_readme_quickstart_works_as_typed(clone: Path, tmp_path: Path, background: list[Background]) -> None:
    blocks = quickstart((clone / "README.md").read_text())
    commands = [step.command for block in blocks for step in block]
    assert any(c.startswith("progresscast emulator") for c in commands), commands  # the markers are there
    home = tmp_path / "home"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "TELEGRAM_", "SLACK_"))}
    env.update(
        # `make install` and `make`'s venv take a minute or two each: the copy runs on this
        # test's venv instead, its own code first on the import path (the venv's editable
        # install points at the original tree).
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(clone / "src"),
        PROGRESSCAST_HOME=str(home),  # a store of its own, not the user's
    )
    # The README's /tmp files are this test's own (other runs may be using /tmp/pc.toml).
    scratch_path = f"{scratch}/"
    port = free_port()  # the written config's gateway, off 8787 (which another run may hold)
    try:
        for block in blocks:
            for step in block:
                command = step.command.replace("/tmp/", scratch_path)
                if command == "make install":
                    continue  # the venv is on PATH already (above)
                step_env = env
                if command.startswith("make demo"):
                    # What the Makefile runs once .venv is built, without its pauses for a
                    # reader and its chat paced at 1/10 of Telegram's time: at a reader's pace
                    # it took 14 s (how it plays at any pace is test_gateway_demo's).
                    command = "progresscast demo --delay 0"
                    step_env = {**env, "PROGRESSCAST_TIME_SCALE": "0.1"}
                if step.background:
                    running = Background(command, clone, env)
                    background.append(running)
                    _until_ready(running, port)
                    for text in step.typed:
                        running.type(text)
                    continue
                done = subprocess.run(
                    ["bash", "-c", f"set -e\n{command}"], cwd=clone, env=step_env, stdin=subprocess.DEVNULL,
                    capture_output=True, text=True, timeout=COMMAND_SECONDS,
                )
                assert done.returncode == 0, f"`{step.command}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
                if command.startswith("progresscast demo"):
                    assert "⛔ Needs you" in done.stdout and "Demo done" in done.stdout, done.stdout
        # What the README says the emulator's terminal then shows.
        [chat] = [b for b in background if "emulator telegram" in b.command]
        chat.shows("Following agent:main:shop.")
        chat.shows("Reproduce the failing export")
        chat.shows("⛔ Needs you — shop: Deploy the fix to staging")
    finally:
        for one in reversed(background):
            one.stop()
        background.clear()
        stop_embedded(home)


def _until_ready(running: Background, port: int) -> None:
    """Until a background command is ready for the next one, as a person would see it."""
    if " emulator " in f" {running.command} ":
        running.shows("Type as the user")
        written = re.search(r"--write-config (\S+)", running.command)
        if written:
            config = Path(written.group(1))
            text = config.read_text()
            assert '"127.0.0.1:8787"' in text, text
            config.write_text(text.replace('"127.0.0.1:8787"', f'"127.0.0.1:{port}"'))
    elif " serve " in f" {running.command} ":
        url = f"http://127.0.0.1:{port}/healthz"

        def answers() -> bool:
            try:
                return httpx.get(url, timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        running.wait_for(f"answer at {url}", answers)
    else:
        raise AssertionError(f"the test does not know when `{running.command}` is ready")
