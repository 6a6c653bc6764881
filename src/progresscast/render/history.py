"""A card's history as people read it: pure functions of the entries, no I/O.

    timeline(entries)                         -> [TimelineLine], one per accepted write
    history_text(entries, tz)                 -> str, `card history --format text`
    render_web_history(entries, card, now_ms) -> str, the web page's HTML fragment

Wording and icons come from `templates/history/theme.j2` ("⛔ Confirm access blocked",
"▶ Repair started"); the web fragment's frame is `templates/web/history.j2`. Agent
text (step names) is made safe for one line here and escaped by the template.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path

from ..model.card import Card, Status
from ..model.history import HistoryEntry, StepChange, active_since
from .ir import plain
from .templates import Theme, template, theme


@dataclass(frozen=True)
class TimelineLine:
    revision: int
    at: str
    """ISO 8601, UTC."""
    at_ms: int
    text: str
    """Plain text, one line: each change's icon and words, joined."""

    @property
    def utc(self) -> str:
        """`HH:MM UTC`: what the web page shows until its script puts it in local time."""
        return datetime.fromisoformat(self.at.replace("Z", "+00:00")).strftime("%H:%M UTC")


def _part(th: Theme, icon: str, word: str, **values: object) -> str:
    return f"{th.icons[icon]} {th.word(word, **values)}"


def _event_part(th: Theme, event: dict[str, object]) -> str:
    """An ask, answer, expiry, withdrawal or Stop, with who and where."""
    kind = str(event.get("kind", ""))
    by = event.get("by") if isinstance(event.get("by"), dict) else {}
    assert isinstance(by, dict)
    name = plain(str(by.get("name") or by.get("user") or "someone"))
    where = plain(str(by.get("platform") or "?"))
    options = event.get("options") if isinstance(event.get("options"), list) else []
    assert isinstance(options, list)
    answer = ", ".join(plain(str(o)) for o in options)
    if isinstance(event.get("text"), str):
        answer = f"{answer}, {event['text']}" if answer else str(event["text"])
    prompt = plain(str(event.get("prompt", "")))
    if kind not in th.icons:
        return _part(th, "same", "same")
    return _part(th, kind, kind, prompt=prompt, name=name, where=where, answer=f"“{plain(answer)}”")


def _parts(th: Theme, entry: HistoryEntry) -> list[str]:
    if entry.event is not None:
        return [_event_part(th, entry.event)]
    if entry.reset:
        return [_part(th, "reset", "reset")]
    if entry.cleared:
        return [_part(th, "cleared", "cleared")]
    parts: list[str] = []
    added: list[StepChange] = []
    removed: list[StepChange] = []
    for change in entry.changes:
        step = plain(change.step)
        if change.after is None:
            removed.append(change)
        elif change.before is None and change.after is Status.pending:
            added.append(change)
        else:
            parts.append(_part(th, change.after.value, change.after.value, step=step))
    for kind, group in (("added", added), ("removed", removed)):
        if len(group) == 1:
            parts.append(_part(th, kind, f"{kind}_one", step=plain(group[0].step)))
        elif group:
            parts.append(_part(th, kind, kind, count=len(group)))
    if entry.note in ("changed", "removed"):
        parts.append(_part(th, "note", f"note_{entry.note}"))
    return parts or [_part(th, "same", "same")]


def timeline(entries: Sequence[HistoryEntry], *, templates_dir: str | Path | None = None) -> list[TimelineLine]:
    th = theme("history", templates_dir)
    return [
        TimelineLine(e.revision, e.at, e.at_ms, th.word("joiner").join(_parts(th, e)))
        for e in entries
    ]


def history_text(
    entries: Sequence[HistoryEntry], tz: tzinfo | None = None, *, templates_dir: str | Path | None = None
) -> str:
    """One line per entry, newest first: `2026-12-01 10:05:03  rev 7  ⛔ Confirm access
    blocked`, in the time zone `tz` (default: the machine's local one)."""
    out = []
    for line in timeline(entries, templates_dir=templates_dir):
        when = datetime.fromtimestamp(line.at_ms / 1000, tz).astimezone(tz)
        out.append(f"{when:%Y-%m-%d %H:%M:%S}  rev {line.revision}  {line.text}")
    return "\n".join(out)


def duration_words(th: Theme, seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return th.word("seconds", n=s)
    if s < 3600:
        return th.word("minutes", n=s // 60)
    if s < 86_400:
        return th.word("hours", h=s // 3600, m=s % 3600 // 60)
    return th.word("days", d=s // 86_400, h=s % 86_400 // 3600)


def render_web_history(
    entries: Sequence[HistoryEntry],
    card: Card | None,
    now_ms: int,
    *,
    templates_dir: str | Path | None = None,
) -> str:
    """The web page's history: how long the card's active step has run (when the kept
    history reaches back to its start) and the timeline, newest first."""
    th = theme("history", templates_dir)
    running = None
    active = card.active_step if card else None
    started = active_since(list(entries), active.step) if active else None
    if active is not None and started is not None:
        running = {
            "icon": th.icons["in_progress"],
            "text": th.word("running", step=plain(active.step)),
            "at": started.at,
            "duration": duration_words(th, (now_ms - started.at_ms) / 1000),
        }
    return template("web/history.j2", templates_dir).render(
        running=running, lines=timeline(entries, templates_dir=templates_dir), words=th.words
    ).strip()
