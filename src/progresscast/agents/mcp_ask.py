"""The MCP tool `ask_person`: the model asks the people following its session and waits
for the answer (docs/agents.md, "Answering from chat")."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ..model.asks import MAX_DETAIL_CHARS, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_PROMPT_CHARS, MAX_TIMEOUT, AskInput
from ..model.card import CardError
from .asking import answered_by, stopped_by
from .sinks import CardSink

ASK_PERSON_DESCRIPTION = (
    "Ask the person following your work in their chat a question, and wait for the answer: a decision only they "
    "can make, an approval before something risky or irreversible, a missing fact. Give `options` (short labels "
    "they tap) or none for a typed answer; `allowText` adds a typed answer besides the options. Ask one clear "
    "question at a time, and only when you cannot reasonably decide yourself. If no answer comes in time, the "
    "result says so: then decide yourself and say what you decided."
)

ASK_PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": f"The question, one line (at most {MAX_PROMPT_CHARS} characters)."},
        "options": {
            "type": "array", "minItems": 1, "maxItems": MAX_OPTIONS,
            "items": {"type": "string", "description": f"A label (at most {MAX_OPTION_CHARS} characters)."},
            "description": "The answers to offer as buttons; omit for a typed answer.",
        },
        "allowText": {"type": "boolean", "description": "Also take a typed answer besides the options."},
        "detail": {"type": "string", "description": f"More context, Markdown (at most {MAX_DETAIL_CHARS} characters)."},
        "timeoutSeconds": {
            "type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT,
            "description": "How long to wait for the answer (default 600).",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}

ASK_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": ["answered", "none", "stopped"]},
        "options": {"type": "array", "items": {"type": "string"}},
        "text": {"type": ["string", "null"]},
        "by": {"type": ["string", "null"]},
    },
    "required": ["state"],
}

ASK_PERSON_TOOL = types.Tool(
    name="ask_person", title="Ask the person", description=ASK_PERSON_DESCRIPTION,
    input_schema=ASK_PERSON_SCHEMA, output_schema=ASK_RESULT_SCHEMA,
)


def _result(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def ask_input(arguments: dict[str, Any]) -> AskInput:
    """The tool's arguments as an ask (`CardError` naming the field and the rule)."""
    for name in arguments:
        if name not in ASK_PERSON_SCHEMA["properties"]:
            raise CardError(name, "is not a known field")
    body = {**arguments, "source": "mcp"}
    body["kind"] = "choice" if arguments.get("options") else "text"
    if body["kind"] == "text":
        body.pop("allowText", None)
    return AskInput.parse(body)


async def ask_person(sink: CardSink, arguments: dict[str, Any]) -> types.CallToolResult:
    ask = ask_input(arguments)
    waited = await sink.ask(ask, float(ask.timeoutSeconds))
    if waited.stop is not None:
        why = stopped_by(waited.stop)
        return _result(
            f"{why}: the person pressed Stop. Stop working now and say briefly where you left off.",
            {"state": "stopped", "by": waited.stop.by.shown},
        )
    if not waited.answered:
        return _result(
            f"No answer came within {ask.timeoutSeconds} s. Decide yourself, and say in your reply what you decided "
            "and why.",
            {"state": "none"},
        )
    answered = waited.answered[0]
    answer = answered.answer
    assert answer is not None
    return _result(
        f"Answered from {answered_by(answered)}: {answer.words}",
        {"state": "answered", "options": list(answer.options), "text": answer.text, "by": answer.by.shown},
    )


def with_stop(result: types.CallToolResult, mark: Any) -> types.CallToolResult:
    """A card write's result, told that Stop was pressed on the run (`mark`, if any)."""
    if mark is None:
        return result
    why = stopped_by(mark)
    said = f"{why}: the person pressed Stop on this run. Stop working now and say briefly where you left off."
    content = [types.TextContent(type="text", text=f"{result.content[0].text}. {said}")]  # type: ignore[union-attr]
    structured = {**(result.structured_content or {}), "stop": why}
    return types.CallToolResult(content=content, structured_content=structured, is_error=result.is_error)


__all__ = ["ASK_PERSON_TOOL", "ask_input", "ask_person", "with_stop"]
