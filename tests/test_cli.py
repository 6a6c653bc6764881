"""`progresscast card …` as a user runs it: separate processes, real Redis."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import alive, raw_client
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.embedded import ensure_embedded, stop_embedded

PLAN = {
    "plan": [
        {"step": "Read", "status": "completed"},
        {"step": "Write", "status": "in_progress"},
        {"step": "Ship", "status": "pending"},
    ],
    "markdown": "A **note**",
}


class CLI:
    def __init__(self, home: Path, redis: str | None = None) -> None:
        """Runs with the embedded Redis of `home`, or the Redis at `redis`."""
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
        self.env["PROGRESSCAST_HOME"] = str(home)
        self.env["PROGRESSCAST_HOOK_SERVER"] = "off"  # a hook call starts no server outliving the test
        self.extra = ["--redis", redis] if redis else []

    def __call__(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "progresscast.cli", *args, *self.extra],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )


@pytest.fixture
def cli(backend: str, request: pytest.FixtureRequest, tmp_path: Path):
    """The command line on this test's backend; on the embedded one it starts the server itself."""
    home = tmp_path / "home"
    yield CLI(home, None if backend == "embedded" else request.getfixturevalue("redis_url"))
    stop_embedded(home)


@pytest.mark.backends
def test_put_get_clear_across_processes(cli: CLI) -> None:
    put = cli("card", "put", "--session", "t-1", stdin=json.dumps(PLAN))
    assert put.returncode == 0, put.stderr
    assert put.stdout == "Progress card updated (rev 1, 1/3 done)\n"
    got = cli("card", "get", "--session", "t-1")
    card = json.loads(got.stdout)
    assert card["revision"] == 1 and card["plan"] == PLAN["plan"] and card["markdown"] == "A **note**"
    assert {"sessionKey", "agentId", "revision", "plan", "markdown", "updatedAt"} <= card.keys()
    note_only = cli("card", "put", "--session", "agent:main:t-1", stdin='{"markdown": "hi"}')
    assert note_only.stdout == "Progress card updated (rev 2)\n"
    cleared = cli("card", "clear", "--session", "t-1", "--agent", "main")
    assert cleared.stdout == "Progress card cleared\n"
    assert cli("card", "get", "--session", "t-1").stdout.strip() == "null"
    assert cli("card", "put", "--session", "t-1", stdin=json.dumps(PLAN)).stdout.startswith(
        "Progress card updated (rev 4,"
    )
    assert cli("card", "reset", "--session", "t-1").stdout == "Progress card cleared\n"
    assert cli("card", "get", "--session", "t-1").stdout.strip() == "null"


def stored(url: str, card: dict[str, object] | None = None) -> dict[bytes, bytes]:
    """Every key of the Redis at `url` with its DUMP, after putting `card` (if given) for t-1."""

    async def run() -> dict[bytes, bytes]:
        if card is not None:
            store = CardStore(connect(url))
            await store.put(Owner("main", "t-1"), CardInput.parse(card))
            await store.redis.aclose()
        client = raw_client(url)
        try:
            return {k: await client.dump(k) for k in sorted(await client.keys("*"))}
        finally:
            await client.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize(
    "args, stdin, words",
    [
        (["card", "put", "--session", "t-1"], "{not json", "not valid JSON"),
        (["card", "put", "--session", "t-1"], '{"plan": [{"step": "x", "status": "done"}]}', "plan[0].status"),
        (["card", "put", "--session", "t-1"], '{"plan": [{"step": 1, "status": "pending"}]}', "plan[0].step: must be a string"),
        (["card", "put", "--session", "t-1", "--agent", "ghost"], "{}", "--agent: 'ghost' is not a configured agent"),
        (["card", "put", "--session", "t 1"], "{}", "--session: must not contain spaces"),
        (["card", "get", "--session", "agent:main:t-1", "--agent", "research"], "", "conflicts"),
        (["card", "put", "--session", "t-1", "--expected-revision", "9"], '{"markdown": "x"}', "expectedRevision"),
        # the ACP proxy names its options as `card` does, and starts no agent
        (["acp", "--session", "t 1", "--", "true"], "", "--session: must not contain spaces"),
        (["acp", "--session", "t-1", "--agent", "ghost", "--", "true"], "", "--agent: 'ghost' is not a configured agent"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_changes_nothing(
    tmp_path: Path, args: list[str], stdin: str, words: str
) -> None:
    home = tmp_path / "home"
    url = ensure_embedded(home)  # the command line finds it through PROGRESSCAST_HOME
    before = stored(url, PLAN)  # a card, written here rather than by another process
    bad = CLI(home)(*args, stdin=stdin)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and words in bad.stderr
    assert stored(url) == before
    stop_embedded(home)


def test_embedded_store_survives_a_crash_of_every_process(tmp_path: Path) -> None:
    cli = CLI(tmp_path / "home")
    assert cli("card", "put", "--session", "t-1", stdin=json.dumps(PLAN)).returncode == 0
    # The write is in the append-only file (a killed process loses nothing written
    # there; everysec's fsync matters to a crash of the machine only).
    deadline = time.monotonic() + 5
    while not any(b"A **note**" in aof.read_bytes() for aof in (tmp_path / "home").rglob("*.aof")):
        assert time.monotonic() < deadline, "the put never reached the append-only file"
        time.sleep(0.02)
    pid = int((tmp_path / "home" / "redis.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    got = cli("card", "get", "--session", "t-1")
    assert json.loads(got.stdout)["revision"] == 1
    stop_embedded(tmp_path / "home")


def test_concurrent_first_starts_share_one_embedded_redis(tmp_path: Path) -> None:
    """Five processes start at once on a fresh home: one server, five distinct revisions."""
    cli = CLI(tmp_path / "home")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "progresscast.cli", "card", "put", "--session", "t-1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
        )
        for _ in range(5)
    ]
    outs = [p.communicate(json.dumps(PLAN), timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    revisions = sorted(int(out.split("rev ")[1].split(",")[0]) for out, _ in outs)
    assert revisions == [1, 2, 3, 4, 5]
    stop_embedded(tmp_path / "home")


def test_render_prints_each_channel_payload(tmp_path: Path) -> None:
    cli = CLI(tmp_path / "home")
    card = tmp_path / "card.json"
    card.write_text(json.dumps({**PLAN, "plan": PLAN["plan"] + [{"step": "<b>x</b> & <script>", "status": "blocked"}]}))
    runs = {
        "telegram": ["--channel", "telegram"],
        "rich": ["--channel", "telegram", "--rich"],
        "short": ["--channel", "text", "--max-lines", "4", "--max-line-chars", "30"],
        "paused": ["--channel", "text", "--paused"],
        "text": ["--channel", "text"],
        "web": ["--channel", "web"],
        "one": ["--channel", "text", "--max-lines", "1"],
    }
    with ThreadPoolExecutor(len(runs)) as pool:  # separate processes, side by side
        done = dict(zip(runs, pool.map(lambda args: cli("render", str(card), *args), runs.values()), strict=True))
    out = {name: json.loads(result.stdout) for name, result in done.items()}
    telegram = out["telegram"]
    assert telegram["method"] == "sendMessage" and telegram["params"]["parse_mode"] == "HTML"
    assert "&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;" in telegram["params"]["text"]
    rich = out["rich"]
    assert rich["method"] == "sendRichMessage" and rich["params"]["rich_message"]["blocks"]
    text = out["short"]["text"]
    lines = text.splitlines()
    assert len(lines) <= 4 and all(len(line) <= 30 for line in lines) and "Write" in text
    assert out["paused"]["text"] != out["text"]["text"]
    web = out["web"]["html"]
    assert web.startswith('<div class="pc-progress"><progress aria-label="Steps · 1/4"') and "<script>" not in web
    one = out["one"]["text"]
    assert one == "[!] <b>x</b> & <script> · 1/4"  # one line: what needs a person, and the count


@pytest.mark.parametrize(
    "args, content, words",
    [
        (["--channel", "text"], "{oops", "not valid JSON"),
        (["--channel", "text"], '{"plan": [{"step": "a", "status": "nope"}]}', "plan[0].status"),
        (["--channel", "text", "--max-lines", "0"], "{}", "--max-lines"),
        (["--channel", "text", "--max-line-chars", "0"], "{}", "--max-line-chars"),
        (["--channel", "text", "--max-line-chars", "19"], "{}", "--max-line-chars"),
        (["--channel", "fax"], "{}", "--channel"),
    ],
)
def test_render_bad_input_exits_2(tmp_path: Path, args: list[str], content: str, words: str) -> None:
    card = tmp_path / "card.json"
    card.write_text(content)
    result = CLI(tmp_path / "home")("render", str(card), *args)
    assert result.returncode == 2 and words in result.stderr and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_global_flags_before_the_subcommand_are_honoured(tmp_path: Path) -> None:
    cli = CLI(tmp_path / "home")
    missing = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", "--config", str(tmp_path / "none.toml"), "card", "get", "--session", "s"],
        capture_output=True, text=True, env=cli.env, timeout=60,
    )
    assert missing.returncode == 2 and "none.toml: no such file" in missing.stderr
    unreachable = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", "--redis", "redis://127.0.0.1:1/0", "card", "get", "--session", "s"],
        capture_output=True, text=True, env=cli.env, timeout=60,
    )
    assert unreachable.returncode == 1 and "Redis" in unreachable.stderr
    assert not (tmp_path / "home").exists()  # the embedded store was never started


@pytest.mark.parametrize(
    "stdin, words",
    [(b"\xff\xfe{}", "not UTF-8"), (b"[" * 60000, "nested too deeply"), (b" " * (1 << 20) + b"{}", "stdin: more than 1,048,576 bytes")],
)
def test_undecodable_input_exits_2(tmp_path: Path, stdin: bytes, words: str) -> None:
    cli = CLI(tmp_path / "home")
    result = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", "card", "put", "--session", "s"],
        input=stdin, capture_output=True, env=cli.env, timeout=60,
    )
    assert result.returncode == 2 and words in result.stderr.decode()
    assert len(result.stderr.decode().strip().splitlines()) == 1
    stop_embedded(tmp_path / "home")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["render", "--channel", "telegram", "/dev/zero"], "/dev/zero: more than 1,048,576 bytes"),
        (["a2a", "ingest", "/dev/zero"], "/dev/zero: more than 67,108,864 bytes"),
        (["render", "--channel", "telegram", "/nonexistent/card.json"], "/nonexistent/card.json: No such file or directory"),
    ],
)
def test_an_endless_or_missing_input_file_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], words: str) -> None:
    cli = CLI(tmp_path / "home")
    result = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", *argv], capture_output=True, text=True, env=cli.env, timeout=60
    )
    assert (result.returncode, result.stderr.strip()) == (2, f"progresscast: {words}")
    stop_embedded(tmp_path / "home")


def test_embedded_home_may_contain_spaces_and_quotes(tmp_path: Path) -> None:
    home = tmp_path / 'my "progress" home'
    cli = CLI(home)
    assert cli("card", "put", "--session", "t-1", stdin=json.dumps(PLAN)).returncode == 0
    assert json.loads(cli("card", "get", "--session", "t-1").stdout)["revision"] == 1
    stop_embedded(home)


def test_card_get_escapes_c1_controls_a_terminal_would_act_on(cli: CLI) -> None:
    note = "red \x9b31m alert \x85 next\u2028line \x7f"
    assert cli("card", "put", "--session", "t-1", stdin=json.dumps({"markdown": note})).returncode == 0
    got = cli("card", "get", "--session", "t-1")
    assert got.returncode == 0, got.stderr
    assert not any(ch in got.stdout for ch in "\x9b\x85\u2028\x7f"), repr(got.stdout)
    assert "\\u009b" in got.stdout and "\\u0085" in got.stdout
    assert json.loads(got.stdout)["markdown"] == note  # still the same text, as JSON


def test_an_empty_agent_is_refused(cli: CLI) -> None:
    result = cli("card", "put", "--session", "t-1", "--agent", "", stdin=json.dumps(PLAN))
    assert result.returncode == 2 and result.stderr.startswith("progresscast: --agent: must not be empty"), result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["card", "get", "--session", "t-1", "--redis", "notaurl"], {},
         "--redis: 'notaurl' is not a Redis URL (it must start with redis://, rediss://, unix://, redis+cluster://, rediss+cluster://)"),
        (["card", "get", "--session", "t-1"], {"PROGRESSCAST_REDIS_URL": "localhost:6379"},
         "PROGRESSCAST_REDIS_URL: 'localhost:6379' is not a Redis URL"),
        (["card", "get", "--session", "t-1"], {"PROGRESSCAST_HOME": "{file}/home"},
         "PROGRESSCAST_HOME: cannot use {file}/home for the embedded Redis (Not a directory)"),
        (["card", "get", "--sesion", "t-1"], {}, "unknown option --sesion — did you mean --session?"),
        (["card", "get"], {}, "--session is required (see 'progresscast card get --help')"),
        (["render", "x.json"], {}, "--channel is required"),
    ],
)
def test_environment_and_usage_mistakes_are_one_line_exit_2(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    cli = CLI(tmp_path / "home")
    cli.env.update({k: v.format(file=afile) for k, v in env.items()})
    result = cli(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"progresscast: {message.format(file=afile)}"), result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # A suggestion comes from the command's own options, never another command's.
        (["card", "get", "--session", "x", "--format", "text"], "unknown option --format (see 'progresscast card get --help')"),
        (["card", "get", "--session", "x", "--foo"], "unknown option --foo (see 'progresscast card get --help')"),
        (["card", "history", "--session", "x", "--formt", "text"],
         "unknown option --formt — did you mean --format? (see 'progresscast card history --help')"),
        # A misspelt option before the command is named, not the command it left out.
        (["--verison"], "unknown option --verison — did you mean --version? (see 'progresscast --help')"),
        (["--redis", "redis://h", "--verison", "card", "get", "--session", "x"],
         "unknown option --verison — did you mean --version?"),
        (["crad"], "COMMAND: invalid choice: 'crad' — did you mean 'card'? (choose from 'card', "),
        (["card", "gte"], "ACTION: invalid choice: 'gte' — did you mean 'get'? (choose from 'put', "),
        (["serve", "--sesion", "x"], "unknown option --sesion (see 'progresscast serve --help')"),
        # Said by the command it was given to.
        (["card", "put", "--session", "x", "plan.json"],
         "unrecognized arguments: plan.json (see 'progresscast card put --help')"),
    ],
)
def test_a_usage_mistake_names_what_this_command_has(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from progresscast.arguments import parse
    from progresscast.cli.parser import full_parser

    with pytest.raises(SystemExit) as exited:
        parse(full_parser(), args, [])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and err.startswith(f"progresscast: {message}"), err


def test_version_and_every_option_described_with_an_example(cli: CLI) -> None:
    import argparse

    from progresscast.cli.parser import full_parser

    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("progresscast ")

    def walk(parser: argparse.ArgumentParser, name: str) -> list[str]:
        seen = [name]
        assert parser.epilog and "example:\n  " in parser.epilog and "progresscast " in parser.epilog, name
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    seen += walk(subparser, f"{name} {sub}")
            elif action.help != argparse.SUPPRESS:
                assert action.help and len(action.help) > 3, (name, action.dest)
        return seen

    commands = walk(full_parser(), "progresscast")
    assert {"progresscast card put", "progresscast render", "progresscast serve", "progresscast demo"} <= set(commands)
    shown = cli("card", "put", "--help")
    assert "example:\n  progresscast card put --session ticket-4821 < examples/plan.json" in shown.stdout


def test_render_shows_text_when_asked_and_json_to_a_pipe(cli: CLI) -> None:
    plan = str(Path(__file__).parents[1] / "examples" / "plan.json")
    shown = cli("render", plan, "--channel", "telegram", "--format", "text")
    assert shown.returncode == 0, shown.stderr
    assert "▶️ Fix and add a regression test" in shown.stdout and "<b>" not in shown.stdout
    piped = cli("render", plan, "--channel", "telegram")
    assert json.loads(piped.stdout)["method"] == "sendMessage"


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    plan = str(Path(__file__).parents[1] / "examples" / "plan.json")
    reader, writer = os.pipe()
    os.close(reader)  # like `| head` that has already exited
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "progresscast.cli", "render", plan, "--channel", "web"],
            stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60,
            env=CLI(tmp_path / "home").env,
        )
    finally:
        os.close(writer)
    assert proc.returncode == 141
    assert proc.stderr == ""


def test_card_put_at_a_terminal_says_it_waits_for_json(tmp_path: Path) -> None:
    import pty

    cli = CLI(tmp_path / "home")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "progresscast.cli", "card", "put", "--session", "t-1"],
            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli.env, text=True,
        )
        os.write(leader, json.dumps(PLAN).encode() + b"\n\x04")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
        stop_embedded(tmp_path / "home")
    assert proc.returncode == 0, err
    assert "waiting for the card's JSON on stdin" in err
    assert out == "Progress card updated (rev 1, 1/3 done)\n"


def test_an_embedded_redis_too_busy_to_answer_is_stopped_all_the_same(tmp_path: Path) -> None:
    """`stop_embedded` on a server that answers no PING in time (frozen here; busy, in
    life): it is told by SIGTERM rather than left running."""
    home = tmp_path / "home"
    ensure_embedded(home)
    pid = int((home / "redis.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        assert stop_embedded(home)
    finally:
        os.kill(pid, signal.SIGCONT)  # it takes the SIGTERM now
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, "the embedded Redis still runs"
        time.sleep(0.02)
