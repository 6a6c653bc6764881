"""The one answer splitter: every channel splits a long answer the same way."""

from __future__ import annotations

from progresscast.render.answer import answer_lines, split_answer
from progresscast.render.ir import visible_units
from progresscast.render.slack import ANSWER_CHUNK, render_slack_final_answer
from progresscast.render.telegram import MAX_TEXT, answer_chunks
from progresscast.testing import read_mrkdwn


def texts(chunks: list[list]) -> list[str]:
    return ["\n".join(line.text for line in chunk) for chunk in chunks]


def test_a_message_breaks_at_a_blank_line_in_its_second_half() -> None:
    # three paragraphs of 40; a limit of 100 takes the first two whole (the blank line
    # between the second and third is in the second half) rather than cutting the third
    answer = "\n\n".join(c * 40 for c in "abc")
    chunks = split_answer(answer_lines(answer), 100)
    assert texts(chunks) == ["a" * 40 + "\n\n" + "b" * 40, "c" * 40]


def test_without_a_late_blank_line_a_message_is_filled() -> None:
    answer = "\n".join(c * 30 for c in "abcd")  # no blank line at all
    chunks = split_answer(answer_lines(answer), 70)
    assert texts(chunks) == ["a" * 30 + "\n" + "b" * 30, "c" * 30 + "\n" + "d" * 30]
    assert all(visible_units(chunk) <= 70 for chunk in chunks)


def test_no_message_starts_or_ends_blank_and_long_lines_are_split() -> None:
    answer = "x" * 250 + "\n\n\n\n" + "y" * 10
    chunks = split_answer(answer_lines(answer), 100)
    assert all(not chunk[0].blank and not chunk[-1].blank for chunk in chunks)
    assert "".join(texts(chunks)).replace("\n", "") == "x" * 250 + "y" * 10
    assert all(visible_units(chunk) <= 100 for chunk in chunks)


def paragraphs(size: int, count: int) -> str:
    return "\n\n".join(f"Paragraph {i}: " + "w" * size for i in range(count))


def test_telegram_and_slack_split_an_answer_with_the_one_splitter() -> None:
    telegram = paragraphs(1500, 6)  # about 9,000 characters: breaks at paragraphs for 4,096
    assert texts(answer_chunks(telegram)) == texts(split_answer(answer_lines(telegram), MAX_TEXT))
    assert all(text.startswith("Paragraph") for text in texts(answer_chunks(telegram)))

    slack = paragraphs(5000, 6)  # about 30,000 characters: breaks at paragraphs for 12,000
    messages = render_slack_final_answer(slack)
    expected = split_answer(answer_lines(slack), ANSWER_CHUNK)
    assert len(messages) == len(expected) > 1
    for message, chunk in zip(messages, expected, strict=True):
        shown = read_mrkdwn(message["params"]["text"]).text
        assert shown.startswith(chunk[0].text[:20]) and shown.rstrip().endswith(chunk[-1].text[-20:])
