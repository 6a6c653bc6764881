"""What a Claude Code run used, read from its transcript at `Stop`.

The transcript (`transcript_path` in every hook event) is JSON lines; each assistant
message carries the API's `usage` `{input_tokens, cache_creation_input_tokens,
cache_read_input_tokens, output_tokens}`, repeated on every line of the same message
(one per content block), so a message counts once, by its id. The run's messages are
those written since it started. Tokens only: the transcript has no price, and a cost
made up of a price list here would be a guess.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from ...model.card import CardError
from ...model.timing import Usage

MAX_BYTES = 64 * 1024 * 1024
"""A transcript larger than this is not read (the run ends without its usage)."""
_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _when(raw: Any) -> float | None:
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def transcript_usage(path: Any, since: float | None = None) -> Usage | None:
    """The tokens of the assistant messages in the transcript at `path` written at or
    after `since` (seconds since the epoch; None: all); None when there are none or the
    file cannot be read."""
    if not isinstance(path, str) or not path:
        return None
    try:
        file = Path(path)
        if file.stat().st_size > MAX_BYTES:
            return None
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    seen: dict[str, tuple[int, int]] = {}
    for n, line in enumerate(lines):
        if '"assistant"' not in line or '"usage"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "assistant" else None
        if not isinstance(message, dict) or not isinstance(usage := message.get("usage"), dict):
            continue
        if since is not None and ((at := _when(entry.get("timestamp"))) is None or at < since):
            continue
        tokens_in = sum(v for k in _INPUT if type(v := usage.get(k)) is int and v >= 0)
        tokens_out = v if type(v := usage.get("output_tokens")) is int and v >= 0 else 0
        key = str(message["id"]) if isinstance(message.get("id"), str) else f"line {n}"
        seen[key] = (tokens_in, tokens_out)  # the last line of a message holds its final count
    if not seen:
        return None
    try:
        return Usage.parse({
            "inputTokens": sum(i for i, _ in seen.values()), "outputTokens": sum(o for _, o in seen.values()),
        })
    except CardError:  # beyond any real count: not shown
        return None


__all__ = ["transcript_usage"]
