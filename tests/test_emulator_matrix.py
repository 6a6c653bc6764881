"""`progresscast emulator matrix --write-config FILE`: a private Synapse with a bot and
a person; the config it writes starts a `serve` whose bot joins the person's room, a
`!pc follow` typed on the emulator's stdin follows a session, and the card put then is
printed as the room shows it. Stopped, the emulator takes Synapse and its data along.

Skipped like the other Matrix tests when Synapse cannot run here, unless
PROGRESSCAST_REQUIRE_SYNAPSE is set."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from synapse_server import REQUIRE_ENV
from test_emulator_config import PLAN, Emulator, Trial, trial, written  # noqa: F401  (the fixture)


def _cannot_run(why: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"Synapse cannot run: {why}")
    pytest.skip(f"Synapse cannot run here: {why}")


async def _started(trial: Trial) -> Emulator:  # noqa: F811
    if importlib.util.find_spec("synapse") is None:
        _cannot_run("matrix-synapse is not installed")
    emulator = await trial.emulator("matrix")
    try:
        await emulator.shows(r"Synapse homeserver on http://127\.0\.0\.1:\d+", timeout=60)
    except AssertionError:
        if emulator.proc.returncode is not None or "Synapse did not start" in "".join(emulator.seen):
            _cannot_run("".join(emulator.seen).strip())
        raise
    return emulator


async def test_matrix_config_serves_the_person_s_room(trial: Trial) -> None:  # noqa: F811
    emulator = await _started(trial)
    try:
        data = Path((await emulator.shows(r"its data in (\S+), removed when this stops")).group(1))
        assert data.is_dir()
        login = await emulator.shows(r"You: (@person\w+:pc\.test), password (\w+)")
        assert login.group(2)
        room = (await emulator.shows(r"Room (!\S+): yours")).group(1)
        await emulator.shows(rf"Wrote {re.escape(str(trial.config))}: .*\[channels\.matrix\].*granted every session")
        text = trial.config.read_text()
        assert trial.config.stat().st_mode & 0o077 == 0  # it holds the bot's access token and the gateway token
        assert f'[[channels.matrix.rooms]]  # the emulator\'s console: granted every session\nid = "{room}"' in text
        trial.config.write_text(text.replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:0"'))
        doctor = trial.run("doctor", "--config", str(trial.config))
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr

        await trial.serve()
        await emulator.shows(r"\(the bot joins the room\)")
        await emulator.type("!pc follow shop")
        await emulator.shows(r"you → !pc follow shop")
        await emulator.shows(r"bot → Following agent:main:shop")
        put = trial.run("card", "put", "--config", str(trial.config), "--session", "shop", stdin=PLAN)
        assert put.returncode == 0, put.stderr
        await emulator.shows(r"the bot (sends|edits) message \S+:\n(    │ .*\n)*    │ .*Fix the login page")
    finally:
        if emulator.proc.returncode is None:
            emulator.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(emulator.proc.wait(), 30)
    assert not data.exists()  # Synapse's temporary folder went with it
    assert emulator.proc.returncode == 0  # a stop by SIGTERM is an ordinary end, as `serve`'s


async def test_press_answers_the_newest_ask_from_the_console(trial: Trial) -> None:  # noqa: F811
    """`press N` typed on the emulator reacts N to the bot's newest ask (`press N on
    MESSAGE`: to that one); the waiting `progresscast ask` prints the chosen option."""
    emulator = await _started(trial)
    try:
        text = await written(emulator, trial)
        trial.config.write_text(text.replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:0"'))
        await trial.serve()
        await emulator.shows(r"\(the bot joins the room\)")
        await emulator.type("!pc follow shop")
        await emulator.shows(r"bot → Following agent:main:shop")
        ask = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "ask", "--config", str(trial.config), "--session", "shop",
            "Deploy?", "--option", "Now", "--option", "Later",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=trial.env(),
        )
        trial.procs.append(ask)
        deploy = (await emulator.shows(r"the bot sends message (\S+):\n(    │ .*\n)*    │ .*Deploy\?")).group(1)
        await emulator.shows(r"    │ .*Later")
        # A newer ask: `press N on MESSAGE` still answers the older one.
        region = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "ask", "--config", str(trial.config), "--session", "shop",
            "Region?", "--option", "EU", "--option", "US",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=trial.env(),
        )
        trial.procs.append(region)
        await emulator.shows(r"the bot sends message \S+:\n(    │ .*\n)*    │ .*Region\?")
        await emulator.shows(r"    │ .*US")
        await emulator.type(f"press 2 on {deploy}")
        await emulator.shows(rf"you react 2 to message {re.escape(deploy)}")
        out, err = await asyncio.wait_for(ask.communicate(), 30)
        assert (ask.returncode, out.decode()) == (0, "Later\n"), err.decode()
        await emulator.type("press 1")
        await emulator.shows(r"you react 1 to message \S+")
        out, err = await asyncio.wait_for(region.communicate(), 30)
        assert (region.returncode, out.decode()) == (0, "EU\n"), err.decode()
        # `reply TEXT` replies to the newest ask: a typed answer.
        ask = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "ask", "--config", str(trial.config), "--session", "shop",
            "Why?", "--text", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=trial.env(),
        )
        trial.procs.append(ask)
        await emulator.shows(r"the bot sends message \S+:\n(    │ .*\n)*    │ .*Why\?")
        await emulator.type("reply not now")
        await emulator.shows(r"you reply to message \S+: not now")
        out, err = await asyncio.wait_for(ask.communicate(), 30)
        assert (ask.returncode, out.decode()) == (0, "not now\n"), err.decode()
    finally:
        if emulator.proc.returncode is None:
            emulator.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(emulator.proc.wait(), 30)
