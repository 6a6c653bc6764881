"""Claude Code's `PermissionRequest` and `PreToolUse` answered from chat (the formats are
in claude_code.py's docstring; Claude Code's hooks reference has them in full)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...model.asks import MAX_DETAIL_CHARS, MAX_OPTION_CHARS, MAX_PROMPT_CHARS, MAX_TIMEOUT, AskInput
from ...model.card import CardError
from ...model.owners import Owner
from ...store.errors import StoreError
from ..asking import answered_by, ask_and_wait, stopped_by
from .context import HookContext

SUMMARY_FIELDS = ("command", "file_path", "notebook_path", "url", "query", "pattern", "path", "prompt")
"""The input field that says what a tool call does, first found first (Bash's command,
Write's and Edit's file, WebFetch's URL, …); any other input is shown as its JSON."""
EXPIRY_MARGIN = 5
"""Seconds an ask outlives the hook's wait: if Claude Code kills the hook at its own
timeout, the ask still ends by itself."""


def summary(tool_input: Any) -> str:
    if isinstance(tool_input, dict):
        for name in SUMMARY_FIELDS:
            value = tool_input.get(name)
            if isinstance(value, str) and value.strip():
                return value
    return json.dumps(tool_input, ensure_ascii=False)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fence(text: str) -> str:
    fence = "~~~~" if "```" in text else "```"
    return f"{fence}\n{text}\n{fence}"


async def answer_in_chat(ctx: HookContext, owner: Owner, event: dict[str, Any]) -> dict[str, Any] | None:
    if event.get("hook_event_name") == "PermissionRequest":
        return await _permission(ctx, owner, event)
    mark = await ctx.store.asks.stop_mark(owner)
    if mark is not None:
        return {"continue": False, "stopReason": stopped_by(mark)}
    if event.get("tool_name") == "AskUserQuestion":
        return await _questions(ctx, owner, event.get("tool_input"))
    return None


def _timeout(ctx: HookContext) -> int:
    return min(MAX_TIMEOUT, int(ctx.wait) + EXPIRY_MARGIN)


@dataclass(frozen=True)
class Approval:
    """A tool call answered from chat: allowed, or denied with why (who denied it, or
    who stopped the run: `stopped`)."""

    allowed: bool
    why: str = ""
    stopped: bool = False


async def approve(ctx: HookContext, owner: Owner, event: dict[str, Any], source: str) -> Approval | None:
    """Ask in chat whether the tool call in `event` may run, and wait: None when it is
    not asked (not a tool call) or nobody answered in time."""
    ask = tool_approval(ctx, event, source)
    if ask is None:
        return None
    waited = await wait_for(ctx, owner, [ask])
    if waited is None:
        return None
    if waited.stop is not None:
        return Approval(False, stopped_by(waited.stop), stopped=True)
    answered = waited.answered[0]
    assert answered.answer is not None
    if not answered.declined:
        return Approval(True)
    return Approval(False, f"Denied from {answered_by(answered)}")


async def _permission(ctx: HookContext, owner: Owner, event: dict[str, Any]) -> dict[str, Any] | None:
    approval = await approve(ctx, owner, event, "claude-code")
    if approval is None:
        return None
    decision: dict[str, Any] = {"behavior": "allow"}
    if not approval.allowed:
        decision = {"behavior": "deny", "message": approval.why}
        if approval.stopped:
            decision["interrupt"] = True
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def tool_approval(ctx: HookContext, event: dict[str, Any], source: str) -> AskInput | None:
    """A tool call (`tool_name`, `tool_input`) as an approval ask naming the tool and what
    it does; None (said on stderr) when it cannot be asked."""
    tool, tool_input = event.get("tool_name"), event.get("tool_input")
    if not (isinstance(tool, str) and tool.strip() and isinstance(tool_input, dict)):
        # Nothing to show a person that says what would run: no chat is pinged for it.
        ctx.warn("the permission request names no tool call (tool_name, tool_input); the terminal decides")
        return None
    said = summary(tool_input)
    detail = [_fence(said)] if len(said) > 120 or "\n" in said else []
    if isinstance(tool_input.get("description"), str):
        detail.insert(0, tool_input["description"])
    body: dict[str, Any] = {
        "kind": "approval", "prompt": _cut(f"{tool}: {said}", MAX_PROMPT_CHARS), "source": source,
        "timeoutSeconds": _timeout(ctx),
    }
    if detail:
        body["detail"] = _cut_detail("\n\n".join(detail))
    try:
        return AskInput.parse(body)
    except CardError as exc:
        ctx.warn(f"the permission request could not be asked in chat ({exc}); the terminal decides")
        return None


def _cut_detail(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


async def _questions(ctx: HookContext, owner: Owner, tool_input: Any) -> dict[str, Any] | None:
    questions = tool_input.get("questions") if isinstance(tool_input, dict) else None
    if not isinstance(questions, list) or not questions:
        return None
    asks: list[AskInput] = []
    labels: list[dict[str, str]] = []  # each ask's shown label → the question's own label
    try:
        for q in questions:
            ask, shown = _question_ask(ctx, q)
            asks.append(ask)
            labels.append(shown)
    except (CardError, TypeError, AttributeError) as exc:
        ctx.warn(f"the question could not be asked in chat ({exc}); the terminal asks it")
        return None
    waited = await wait_for(ctx, owner, asks)
    if waited is None:
        return None
    if waited.stop is not None:
        return {"continue": False, "stopReason": stopped_by(waited.stop)}
    answers: dict[str, str] = {}
    for q, ask, shown in zip(questions, waited.answered, labels, strict=True):
        assert ask.answer is not None
        chosen = [shown.get(label, label) for label in ask.answer.options]
        if ask.answer.text is not None:
            chosen.append(ask.answer.text)
        answers[q["question"]] = ", ".join(chosen)
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "updatedInput": {**tool_input, "answers": answers},
        }
    }


def _question_ask(ctx: HookContext, q: Any) -> tuple[AskInput, dict[str, str]]:
    """One question as a choice ask (a typed answer too: Claude Code offers "Other"), and
    its labels as shown (cut to fit) → as the question has them."""
    text = q["question"]
    if not isinstance(text, str):
        raise CardError("questions[].question", "must be a string")
    shown: dict[str, str] = {}
    lines: list[str] = []
    for option in q.get("options") or []:
        label = str(option["label"])
        cut = _cut(label, MAX_OPTION_CHARS)
        shown[cut] = label
        description = option.get("description")
        lines.append(f"- **{label}**" + (f" — {description}" if isinstance(description, str) and description else ""))
    header = q.get("header")
    prompt = f"{header}: {text}" if isinstance(header, str) and header and header not in text else text
    body: dict[str, Any] = {
        "kind": "choice", "prompt": _cut(prompt, MAX_PROMPT_CHARS), "options": list(shown) or None,
        "multi": bool(q.get("multiSelect")) and bool(shown), "allowText": True, "source": "claude-code",
        "timeoutSeconds": _timeout(ctx),
    }
    if not shown:
        body["kind"] = "text"
        del body["options"], body["multi"]
    details = ([text] if len(prompt) > MAX_PROMPT_CHARS else []) + (["\n".join(lines)] if lines else [])
    if details:
        body["detail"] = _cut_detail("\n\n".join(details))
    return AskInput.parse(body), shown


async def wait_for(ctx: HookContext, owner: Owner, asks: list[AskInput]) -> Any:
    """Ask and wait up to `--wait`; None when no answer came (or the asks could not be
    opened: five are open already), which leaves the decision to the terminal."""
    try:
        waited = await ask_and_wait(ctx.store, owner, asks, ctx.wait)
    except StoreError as exc:
        ctx.warn(f"{exc}; the terminal decides")
        return None
    if waited.stop is None and not waited.answered:
        return None
    return waited
