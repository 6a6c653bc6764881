"""The command line's own reference: every `--help` opens with what the command does,
required options read as required, and a value out of range names its rule."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from progresscast.cli.parser import full_parser


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progresscast.cli", *args], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "PROGRESSCAST_HOME": str(home), "PROGRESSCAST_HOOK_SERVER": "off",
             "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )


def parsers(parser: argparse.ArgumentParser, name: str = "progresscast") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser with its name, the program's first."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from parsers(subparser, f"{name} {sub}")


def test_every_help_has_a_description() -> None:
    missing = [name for name, parser in parsers(full_parser()) if not (parser.description and len(parser.description) > 10)]
    assert missing == []


def test_the_programs_help_names_every_adapter(tmp_path: Path) -> None:
    shown = run("--help", home=tmp_path)
    assert shown.returncode == 0
    assert "Telegram/Slack/Discord/Matrix adapters" in " ".join(shown.stdout.split())


def test_a_required_option_reads_as_required(tmp_path: Path) -> None:
    shown = run("card", "put", "--help", home=tmp_path).stdout
    usage = " ".join(shown.split("\n\n")[0].split())
    assert "--session KEY" in usage and "[--session KEY]" not in usage, usage
    assert "required:\n  --session KEY" in shown and "(required)" not in shown
    missing = run("card", "get", home=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == "progresscast: --session is required (see 'progresscast card get --help')\n"
    misspelt = run("card", "get", "--sesion", "t-1", home=tmp_path)
    assert misspelt.stderr.startswith("progresscast: unknown option --sesion — did you mean --session?")


def test_a_value_out_of_range_names_the_option_and_its_rule(tmp_path: Path) -> None:
    bad = run("card", "history", "--session", "shop", "--limit", "500", home=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == (
        "progresscast: --limit: must be between 1 and 200, not '500' (see 'progresscast card history --help')\n"
    )
    fraction = run("emulator", "telegram", "--fault-rate", "2", home=tmp_path)
    assert fraction.returncode == 2 and fraction.stderr.startswith("progresscast: --fault-rate: must be a share")


def test_version_is_the_packages(tmp_path: Path) -> None:
    from importlib.metadata import version

    shown = run("--version", home=tmp_path)
    assert shown.returncode == 0 and shown.stdout == f"progresscast {version('progresscast')}\n"


def test_every_usage_line_names_every_option_its_help_lists() -> None:
    missing = [
        f"{name}: {action.option_strings[-1]}"
        for name, parser in parsers(full_parser())
        for action in parser._actions
        if action.option_strings and action.help is not argparse.SUPPRESS
        and not any(option in parser.format_usage() for option in action.option_strings)
    ]
    assert missing == []
