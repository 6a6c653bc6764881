"""The whole command line: every command and its options, in the order `--help` lists them."""

from __future__ import annotations

import argparse
from typing import Any

from ..agents.hooks.command import add_hook
from ..arguments import Parser, example, program, whole
from ..config.slack import SLACK_CHANNEL_ID


def _fraction(raw: str) -> float:
    """A share from 0 to 1 (argparse turns the error into a one-line usage error)."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a share from 0 to 1, not {raw!r}")
    return value


def _slack_channel(raw: str) -> str:
    """A Slack channel id, as the config takes them."""
    if not SLACK_CHANNEL_ID.fullmatch(raw):
        raise argparse.ArgumentTypeError(f"must be a channel id (C, G or D, then capitals and digits), not {raw!r}")
    return raw


def _emulator_parser(
    emulators: Any, common: argparse.ArgumentParser, name: str, *, help: str, description: str, epilog: str
) -> argparse.ArgumentParser:
    """`progresscast emulator NAME`, with the `--port` every emulator listens on and the
    config it may write."""
    parser: argparse.ArgumentParser = emulators.add_parser(
        name, help=help, parents=[common], description=description, epilog=epilog
    )
    parser.add_argument("--port", type=int, default=0, metavar="N", help="port to listen on (default: a free one)")
    parser.add_argument(
        "--write-config", metavar="FILE",
        help="write a whole config there (gateway token, agents, the channel pointed at this emulator, the console "
        "granted every session; --redis is its store) for `progresscast serve --config FILE`, and print what to "
        "run next",
    )
    return parser


def full_parser() -> argparse.ArgumentParser:
    parser, common, commands = program()
    add_commands(commands, common)
    return parser


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Every command, in the order `--help` lists them."""
    from ..config.base import Mode
    from ..model.history import DEFAULT_LIMIT as HISTORY_DEFAULT
    from ..model.history import MAX_LIMIT as HISTORY_MAX

    card = commands.add_parser(
        "card", help="read and write progress cards", parents=[common],
        description="Read and write progress cards in the store, as an agent or a script would.",
        epilog=example("progresscast card get --session ticket-4821"),
    )
    card_commands = card.add_subparsers(dest="card_command", required=True, parser_class=Parser, metavar="ACTION")
    for name, text, sample in [
        ("put", "write a card from JSON on stdin; prints the receipt",
         "progresscast card put --session ticket-4821 < examples/plan.json"),
        ("get", "print the card as JSON, or null", "progresscast card get --session ticket-4821 --agent research"),
        ("clear", "clear the card", "progresscast card clear --session ticket-4821"),
        ("reset", "clear the card at a boundary: writes admitted before it are refused",
         "progresscast card reset --session ticket-4821"),
        ("history", "print what each write changed, newest first",
         "progresscast card history --session ticket-4821 --limit 20 --format text"),
    ]:
        sub = card_commands.add_parser(name, help=text, description=text, parents=[common], epilog=example(sample))
        sub.required_argument("--session", metavar="KEY", help="the session key, e.g. ticket-4821")
        sub.add_argument("--agent", metavar="ID", help="the agent owning the card (default: agents.default)")
        if name == "put":
            sub.add_argument(
                "--expected-revision", type=int, metavar="N",
                help="write only if the card's revision is still N (compare-and-set)",
            )
        if name == "history":
            sub.add_argument(
                "--limit", type=whole(HISTORY_MAX), default=None, metavar="N",
                help=f"at most N entries (1 to {HISTORY_MAX}; default {HISTORY_DEFAULT})",
            )
            sub.add_argument(
                "--format", choices=["text", "json"], default=None,
                help="text: one line per entry in local time; json: a list of the entries "
                "(default: text at a terminal, else json)",
            )

    render = commands.add_parser(
        "render", help="preview what a channel shows", parents=[common],
        description="Preview what a channel would show for a card: as text at a terminal, else as JSON.",
        epilog=example(
            "progresscast render examples/plan.json --channel telegram",
            "progresscast card get --session ticket-4821 | progresscast render - --channel text --format json",
        ),
    )
    render.add_argument(
        "card_file", metavar="CARD.json", help="a card (as `card get` prints) or a write's input; - for stdin"
    )
    render.required_argument(
        "--channel", choices=["telegram", "slack", "discord", "matrix", "text", "web"],
        help="the channel to preview",
    )
    render.add_argument(
        "--format", choices=["text", "json"], default=None,
        help="text: what a person sees; json: the payload the channel gets (default: text at a terminal, else json)",
    )
    render.add_argument(
        "--rich", action="store_true", help="Telegram rich message (checkboxes) instead of HTML; Slack plan display"
    )
    render.add_argument(
        "--mode", choices=[m.value for m in Mode], default=None,
        help="what the draft shows (default: the config's streaming.mode, else progress)",
    )
    render.add_argument("--max-lines", type=int, metavar="N", help="lines of the progress draft (default: 8)")
    render.add_argument(
        "--max-line-chars", type=int, metavar="N", help="longer lines are cut with a middle … (default: 120)"
    )
    render.add_argument("--paused", action="store_true", help="show unfinished steps as paused")

    from ..agents.a2a.commands import add_commands as add_a2a_commands

    add_a2a_commands(commands, common, Parser)

    from .pairing import add_commands as add_pairing_commands

    add_pairing_commands(commands, common)

    serve = commands.add_parser(
        "serve", help="gateway, web page, Telegram/Slack/Discord/Matrix adapters, workers", parents=[common],
        description="Run the HTTP gateway and web page, and each chat adapter (Telegram, Slack, Discord, Matrix) whose "
        "token is configured. "
        "Ctrl-C or SIGTERM stops it.",
        epilog=example(
            "PROGRESSCAST_TOKEN=$(openssl rand -hex 16) progresscast serve --config config/progresscast.toml"
        ),
    )
    serve.set_defaults(serve=True)

    from .doctor import add_doctor

    add_doctor(commands, common)

    from .status import add_status

    add_status(commands, common)

    mcp = commands.add_parser(
        "mcp", help="MCP server with the progress_card, update_plan and ask_person tools", parents=[common],
        description="Serve the MCP tools progress_card, update_plan and ask_person to an agent, over stdio (what an "
        "agent starts) or streamable HTTP; each call writes the session's card or asks its followers.",
        epilog=example("progresscast mcp --session ticket-4821", "progresscast mcp --http 127.0.0.1:8788"),
    )
    mcp.add_argument(
        "--session", metavar="KEY", help="session key (default: $PROGRESSCAST_SESSION, else this directory's name)"
    )
    mcp.add_argument("--agent", metavar="ID", help="agent id (default: the configured default agent)")
    mcp.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on HOST:PORT instead of stdio")
    mcp.add_argument("--gateway", metavar="URL", help="write through this gateway's RPC instead of the store")
    mcp.add_argument("--token", metavar="T", help="gateway token (default: $PROGRESSCAST_TOKEN)")
    mcp.add_argument("--tools", metavar="NAMES", help="tools to offer (default: progress_card,update_plan,ask_person)")

    add_hook(commands, common)

    emulator = commands.add_parser(
        "emulator", help="run a service emulator on its own (no token needed)", parents=[common],
        epilog=example("progresscast emulator telegram --port 8081"),
    )
    emulators = emulator.add_subparsers(dest="emulator", required=True, parser_class=Parser, metavar="SERVICE")
    telegram = _emulator_parser(
        emulators, common, "telegram", help="the Bot API emulator; type on stdin as a chat user",
        description="The Bot API emulator the tests use, on its own: point channels.telegram.apiBaseUrl at it, "
        "type lines as a user of one chat, and see what the chat shows.",
        epilog=example(
            "progresscast emulator telegram --write-config progresscast.toml",
            "progresscast emulator telegram --port 8081 --chat -1004821 --admin",
        ),
    )
    telegram.add_argument(
        "--chat", type=int, default=4821, metavar="ID",
        help="the chat you type in (default: 4821, a private chat; a negative id is a group)",
    )
    telegram.add_argument(
        "--admin", action="store_true",
        help="in a group: you are its creator, so you may change what it follows (default: an ordinary member)",
    )
    telegram.add_argument(
        "--fault-rate", type=_fraction, default=0.0, metavar="R",
        help="fail this share (0 to 1) of the calls that act on a chat with 5xx, timeouts and 429 (default: 0)",
    )
    telegram.add_argument(
        "--fault-seed", type=int, default=0, metavar="N", help="seed of the random faults (default: 0)"
    )

    slack = _emulator_parser(
        emulators, common, "slack", help="the Slack Web API emulator; type on stdin as a person in a channel",
        description="The Slack emulator the tests use, on its own: point channels.slack at it (token, "
        "signingSecret, apiBaseUrl as printed), type `/progresscast …` as a slash command or any other line "
        "as a message, and see what the channel shows.",
        epilog=example("progresscast emulator slack --port 8082 --app http://127.0.0.1:8787"),
    )
    slack.add_argument(
        "--channel", type=_slack_channel, default="C0TEST0001", metavar="ID",
        help="the channel you type in (default: C0TEST0001)",
    )
    slack.add_argument(
        "--app", default="http://127.0.0.1:8787", metavar="URL",
        help="the gateway of `progresscast serve`: slash commands and events are sent there (default: %(default)s)",
    )

    discord = _emulator_parser(
        emulators, common, "discord", help="the Discord REST emulator; type slash commands on stdin",
        description="The Discord emulator the tests use, on its own: point channels.discord.apiBaseUrl at it, "
        "run `progresscast serve` and `progresscast discord register`, then type /progresscast commands as a "
        "member of one channel and see what the channel shows.",
        epilog=example(
            "progresscast emulator discord --port 8082 --interactions http://127.0.0.1:8787/discord/interactions"
        ),
    )
    discord.add_argument(
        "--interactions", metavar="URL", default="http://127.0.0.1:8787/discord/interactions",
        help="where interactions are sent (the gateway's /discord/interactions; default: the default gateway's)",
    )
    discord.add_argument(
        "--channel", default="200000000000000001", metavar="ID",
        help="the channel you type in (default: 200000000000000001)",
    )

    _emulator_parser(
        emulators, common, "matrix", help="a private Synapse homeserver (test extra); type in a room as a person",
        description="A Synapse homeserver on this machine, as the tests run it (matrix-synapse comes with the test "
        "extra), with a bot account, a person and a room of theirs: point channels.matrix at it, type `!pc …` "
        "commands as the person and see what the room shows. --port is Synapse's.",
        epilog=example("progresscast emulator matrix --write-config progresscast.toml"),
    )

    from ..model.asks import DEFAULT_TIMEOUT, MAX_TIMEOUT

    ask = commands.add_parser(
        "ask", help="ask the people following a session, and wait for the answer", parents=[common],
        description="Put a question to the chats following a session (buttons where the chat has them) and wait. "
        "Prints the chosen label(s), one per line, or the typed answer. Exit status: 0 answered, 3 no answer in "
        "time, 4 withdrawn or the run was stopped from chat.",
        epilog=example(
            "progresscast ask --session shop --approval 'Deploy to production?'",
            "progresscast ask --session shop 'Which database?' --option Postgres --option SQLite --text",
        ),
    )
    ask.add_argument("prompt", metavar="PROMPT", help="the question: one line, at most 280 characters")
    ask.required_argument("--session", metavar="KEY", help="the session key, e.g. ticket-4821")
    ask.add_argument("--agent", metavar="ID", help="the agent owning the session (default: agents.default)")
    ask.add_argument("--option", action="append", metavar="LABEL", help="an answer to offer (repeat: 1 to 10)")
    ask.add_argument("--approval", action="store_true", help="an approval: Allow / Deny unless --option is given")
    ask.add_argument("--text", action="store_true", help="take a typed answer (besides any options)")
    ask.add_argument("--multi", action="store_true", help="several options may be chosen")
    ask.add_argument("--detail", metavar="TEXT", help="more about the question (Markdown, at most 2,000 characters)")
    ask.add_argument(
        "--timeout", type=whole(MAX_TIMEOUT, "a whole number of seconds"), default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait (1 to {MAX_TIMEOUT}; default {DEFAULT_TIMEOUT}); the ask expires then",
    )

    acp = commands.add_parser(
        "acp", help="run an ACP agent for an editor, showing its plan in chat (Stop and approvals too)",
        parents=[common],
        usage="progresscast acp [-h] [--redis URL] [--config FILE] --session KEY [--agent ID] "
        "-- AGENT_COMMAND [ARGS ...]",
        description="Put this in the editor's agent settings in place of the agent: it starts AGENT_COMMAND and "
        "passes every Agent Client Protocol message both ways unchanged, while the session's card shows the "
        "agent's plan, tool calls and answer; permission requests are asked in chat too, and Stop in chat "
        "cancels the turn. Exits with the agent's exit status.",
        epilog=example("progresscast acp --session shop -- gemini --experimental-acp"),
    )
    acp.required_argument("--session", metavar="KEY", help="the session key whose card the agent writes")
    acp.add_argument("--agent", metavar="ID", help="the agent owning the session (default: agents.default)")

    discord_commands = commands.add_parser(
        "discord", help="Discord: register the /progresscast command", parents=[common],
        epilog=example("progresscast discord register --guild 123456789012345678"),
    )
    discord_sub = discord_commands.add_subparsers(
        dest="discord", required=True, parser_class=Parser, metavar="COMMAND"
    )
    register = discord_sub.add_parser(
        "register", help="put the /progresscast slash command (global, or in one server)", parents=[common],
        description="Register (or replace) the /progresscast command with channels.discord.token and applicationId. "
        "Global commands reach every server the bot is in; --guild shows it in one server at once.",
        epilog=example("progresscast discord register --config progresscast.toml --guild 123456789012345678"),
    )
    register.add_argument("--guild", metavar="ID", help="a server (guild) id: register there only, at once")

    demo = commands.add_parser(
        "demo", help="play the bundled example on a temporary store of its own", parents=[common],
        description="Play the bundled example card step by step on a temporary store of its own, and show it as "
        "a chat would; --serve keeps the web page and gateway up afterwards.",
        epilog=example("progresscast demo", "progresscast demo --serve --delay 2"),
    )
    demo.add_argument("--serve", action="store_true", help="keep serving after the example")
    demo.add_argument("--delay", type=float, default=None, metavar="SECONDS", help="seconds between steps")
