"""Every rule of docs/card.md on the card model (pure, no Redis)."""

from __future__ import annotations

import pytest

from progresscast.model.card import CardError, CardInput, StepCounts, WriteResult


def step(text: str = "Do it", status: str = "pending", **extra: object) -> dict:
    return {"step": text, "status": status, **extra}


def rejected(data: object) -> CardError:
    with pytest.raises(CardError) as info:
        CardInput.parse(data)
    return info.value


def test_fifty_steps_accepted_fifty_one_rejected() -> None:
    assert len(CardInput.parse({"plan": [step(f"s{i}") for i in range(50)]}).plan) == 50
    err = rejected({"plan": [step(f"s{i}") for i in range(51)]})
    assert err.field == "plan" and "at most 50 steps" in err.rule


def test_step_limit_counts_utf8_bytes() -> None:
    assert CardInput.parse({"plan": [step("é" * 256)]}).plan[0].step == "é" * 256  # 512 bytes
    err = rejected({"plan": [step("ok"), step("é" * 256 + "x")]})
    assert err.field == "plan[1].step" and "512 UTF-8 bytes" in err.rule


def test_step_empty_after_cleaning_rejected() -> None:
    err = rejected({"plan": [step("\u200b\u2060 \ufeff")]})
    assert err.field == "plan[0].step" and "empty" in err.rule


@pytest.mark.parametrize("status", ["pending", "in_progress", "completed", "blocked", "skipped"])
def test_five_statuses(status: str) -> None:
    assert CardInput.parse({"plan": [step(status=status)]}).plan[0].status == status


@pytest.mark.parametrize("status", ["done", "PENDING", "", 3, None])
def test_unknown_status_rejected(status: object) -> None:
    err = rejected({"plan": [step(status=status)]})  # type: ignore[arg-type]
    assert err.field == "plan[0].status"
    assert "pending, in_progress, completed, blocked, skipped" in err.rule


def test_two_in_progress_rejected() -> None:
    err = rejected({"plan": [step("a", "in_progress"), step("b", "in_progress")]})
    assert err.field == "plan" and "at most one step may be in_progress" in err.rule


def test_note_cut_at_280_with_ellipsis() -> None:
    assert CardInput.parse({"plan": [step(note="n" * 280)]}).plan[0].note == "n" * 280
    note = CardInput.parse({"plan": [step(note="n" * 281)]}).plan[0].note
    assert note == "n" * 279 + "…" and len(note) == 280


def test_markdown_limit_in_bytes() -> None:
    assert CardInput.parse({"markdown": "€" * 2730}).markdown  # 8,190 bytes
    err = rejected({"markdown": "€" * 2731 + "ab"})
    assert err.field == "markdown" and "8192 UTF-8 bytes" in err.rule


@pytest.mark.parametrize(
    "data, field",
    [
        ({"plan": [{"step": 5, "status": "pending"}]}, "plan[0].step"),
        ({"plan": [{"step": "x", "status": "pending", "note": 1}]}, "plan[0].note"),
        ({"plan": "do things"}, "plan"),
        ({"markdown": ["x"]}, "markdown"),
        ({"plan": [{"status": "pending"}]}, "plan[0].step"),
        ({"plan": [{"step": "x", "status": "pending", "owner": "me"}]}, "plan[0].owner"),
        ({"plan": ["x"]}, "plan[0]"),
        ({"title": "x"}, "title"),
    ],
)
def test_wrong_shapes_name_the_field(data: object, field: str) -> None:
    assert rejected(data).field == field


def test_not_an_object_rejected() -> None:
    assert rejected(["plan"]).field == "card"


def test_cleaning_removes_invisible_and_bidi_characters() -> None:
    hidden = "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2064\u206a\u206f\ufeff\U000e0001\U000e007f"
    card = CardInput.parse(
        {"plan": [step(f"Buil{hidden}d", note=f"n{hidden}ote")], "markdown": f"**bo{hidden}ld**"}
    )
    assert card.plan[0].step == "Build"
    assert card.plan[0].note == "note"
    assert card.markdown == "**bold**"
    # Characters just outside the ranges survive (U+FE0F: emoji presentation).
    kept = "a\u061bb\u2070c\u2400d\ufe0fe\U000e1000f\u180ag"
    assert CardInput.parse({"markdown": kept}).markdown == kept


def _chars(*spans: tuple[int, int]) -> list[str]:
    return [chr(c) for first, last in spans for c in range(first, last + 1)]


# Written out from docs/card.md, independently of the code's pattern.
BIDI_CONTROL = _chars((0x061C, 0x061C), (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069))
INVISIBLE = _chars(
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200D), (0x2060, 0x2065), (0x206A, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0E),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)


def test_every_removed_character_as_a_whole_step_is_refused() -> None:
    for ch in BIDI_CONTROL + INVISIBLE:
        err = rejected({"plan": [step(ch * 3)]})
        assert (err.field, err.rule) == ("plan[0].step", "must not be empty"), f"U+{ord(ch):04X}"
        card = CardInput.parse({"plan": [step(f"a{ch}b", note=f"c{ch}d")], "markdown": f"e{ch}f"})
        assert (card.plan[0].step, card.plan[0].note, card.markdown) == ("ab", "cd", "ef"), f"U+{ord(ch):04X}"


def test_a_step_of_control_characters_only_is_refused() -> None:
    # every renderer shows a control character as a space: such a step would show nothing
    for text in ["\x00", "\x00\x1b\x7f", "\x9f \x01", "\u2028\u2029"]:
        err = rejected({"plan": [step(text)]})
        assert (err.field, err.rule) == ("plan[0].step", "must not be empty"), repr(text)
    assert CardInput.parse({"plan": [step("a\x00b")]}).plan[0].step == "a\x00b"


@pytest.mark.parametrize(
    "data",
    [{}, {"plan": []}, {"plan": None, "markdown": None}, {"plan": [], "markdown": "  \n\t "}, {"markdown": ""}],
)
def test_empty_input_clears(data: dict) -> None:
    assert CardInput.parse(data).clears


def test_plan_or_note_alone_does_not_clear() -> None:
    assert not CardInput.parse({"markdown": "hi"}).clears
    assert not CardInput.parse({"plan": [step()]}).clears
    only_plan = CardInput.parse({"plan": [step()], "markdown": "   "})
    assert only_plan.markdown is None and not only_plan.clears


def test_receipts_word_for_word() -> None:
    steps = StepCounts(completed=1, total=3)
    assert WriteResult(revision=4, steps=steps).receipt == "Progress card updated (rev 4, 1/3 done)"
    assert WriteResult(revision=4).receipt == "Progress card updated (rev 4)"
    assert WriteResult(revision=5, cleared=True).receipt == "Progress card cleared"
    assert WriteResult(revision=4, steps=steps).to_json() == {
        "revision": 4,
        "steps": {"completed": 1, "total": 3},
    }
    assert WriteResult(revision=4).to_json() == {"revision": 4, "steps": None}


@pytest.mark.parametrize(
    "data, field",
    [
        ({"plan": [{"step": "a\ud800b", "status": "pending"}]}, "plan[0].step"),
        ({"plan": [{"step": "x", "status": "pending", "note": "\udfff"}]}, "plan[0].note"),
        ({"markdown": "a\ud800"}, "markdown"),
    ],
)
def test_a_card_built_in_code_refuses_a_lone_surrogate_with_the_rule(data: object, field: str) -> None:
    # Every input checks first (reject_lone_surrogates); the card keeps the same words.
    err = rejected(data)
    assert (err.field, err.rule) == (field, "must be valid Unicode text (no lone surrogates)")
