"""Telegram's HTML parse mode: what it accepts, what it refuses and in which words."""

from __future__ import annotations

import pytest

from progresscast.testing.telegram_html import (
    MAX_TEXT,
    Entity,
    ParsedText,
    TelegramHTMLError,
    fix_text,
    parse,
    utf16_len,
    visible_length,
)

PREFIX = "Bad Request: can't parse entities: "


def refusal(html: str) -> str:
    with pytest.raises(TelegramHTMLError) as info:
        parse(html)
    return info.value.description


# --- accepted tags ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "entity"),
    [
        ("<b>x</b>", Entity("bold", 0, 1)),
        ("<strong>x</strong>", Entity("bold", 0, 1)),
        ("<i>x</i>", Entity("italic", 0, 1)),
        ("<em>x</em>", Entity("italic", 0, 1)),
        ("<u>x</u>", Entity("underline", 0, 1)),
        ("<ins>x</ins>", Entity("underline", 0, 1)),
        ("<s>x</s>", Entity("strikethrough", 0, 1)),
        ("<strike>x</strike>", Entity("strikethrough", 0, 1)),
        ("<del>x</del>", Entity("strikethrough", 0, 1)),
        ("<tg-spoiler>x</tg-spoiler>", Entity("spoiler", 0, 1)),
        ('<span class="tg-spoiler">x</span>', Entity("spoiler", 0, 1)),
        ("<code>x</code>", Entity("code", 0, 1)),
        ("<pre>x</pre>", Entity("pre", 0, 1)),
        ("<blockquote>x</blockquote>", Entity("blockquote", 0, 1)),
        ("<blockquote expandable>x</blockquote>", Entity("expandable_blockquote", 0, 1)),
        ('<a href="https://example.org/?b=1&amp;c=2">x</a>', Entity("text_link", 0, 1, "https://example.org/?b=1&c=2")),
        ('<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>', Entity("custom_emoji", 0, 2, "5368324170671202286")),
        ('<tg-time unix="1700000000" format="wDT">x</tg-time>', Entity("date_time", 0, 1, (1700000000, "wDT"))),
        ("<B>x</B>", Entity("bold", 0, 1)),
    ],
)
def test_each_accepted_tag_becomes_its_entity(html: str, entity: Entity) -> None:
    assert parse(html) == ParsedText("x" if "👍" not in html else "👍", [entity])


def test_unknown_attributes_are_ignored() -> None:
    parsed = parse('<b data-x="1" style=bold>x</b> <a href="https://t.me" target="_blank">y</a>')
    assert parsed.entities == [Entity("bold", 0, 1), Entity("text_link", 2, 1, "https://t.me")]


def test_pre_with_code_language_is_one_pre_entity_with_language() -> None:
    parsed = parse('<pre><code class="language-py">print(1)</code></pre>')
    assert parsed == ParsedText("print(1)", [Entity("pre", 0, 8, "py")])
    assert parsed.entities[0].to_api() == {"type": "pre", "offset": 0, "length": 8, "language": "py"}


def test_lone_code_drops_its_language() -> None:
    assert parse('<code class="language-py">x</code>').entities == [Entity("code", 0, 1)]


def test_empty_tags_make_no_entity() -> None:
    assert parse("<b></b>x") == ParsedText("x", [])


def test_link_without_href_links_its_own_text_and_bad_links_are_dropped() -> None:
    assert parse("<a>example.com</a>").entities == [Entity("text_link", 0, 11, "http://example.com")]
    assert parse('<a href="javascript:alert(1)">x</a>').entities == []


def test_end_tag_without_name_closes_the_open_tag() -> None:
    assert parse("<b>x</>").entities == [Entity("bold", 0, 1)]


# --- refused tags and malformed markup -------------------------------------------------------


def test_br_is_refused_with_telegrams_words() -> None:
    assert refusal("<b>Plan</b> <br>next") == PREFIX + 'Unsupported start tag "br" at byte offset 12'


@pytest.mark.parametrize("tag", ["p", "ul", "li", "div", "h1", "img", "br/", "font", "table"])
def test_other_html_tags_are_refused(tag: str) -> None:
    assert refusal(f"ok <{tag}>") == PREFIX + f'Unsupported start tag "{tag}" at byte offset 3'


def test_byte_offsets_count_utf8_bytes() -> None:
    assert refusal("é<p>") == PREFIX + 'Unsupported start tag "p" at byte offset 2'
    assert refusal("😀<p>") == PREFIX + 'Unsupported start tag "p" at byte offset 4'


def test_a_bare_less_than_is_an_empty_tag_name() -> None:
    assert refusal("a < b") == PREFIX + 'Unsupported start tag "" at byte offset 2'


def test_span_needs_the_spoiler_class() -> None:
    expected = PREFIX + 'Tag "span" must have class "tg-spoiler" at byte offset 0'
    assert refusal("<span>x</span>") == expected
    assert refusal('<span class="big">x</span>') == expected


def test_unclosed_tag_names_the_innermost_open_tag() -> None:
    assert refusal("<b>bold") == PREFIX + 'Can\'t find end tag corresponding to start tag "b"'
    assert refusal("<b><i>x") == PREFIX + 'Can\'t find end tag corresponding to start tag "i"'
    assert refusal("<b><i>x</i>") == PREFIX + 'Can\'t find end tag corresponding to start tag "b"'


def test_mismatched_end_tag() -> None:
    assert refusal("<b><i>x</b></i>") == (
        PREFIX + 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'
    )


def test_end_tag_with_nothing_open() -> None:
    assert refusal("x</b>") == PREFIX + "Unexpected end tag at byte offset 1"


def test_start_tag_cut_by_the_end_of_text() -> None:
    assert refusal("a <b") == PREFIX + "Unclosed start tag at byte offset 2"
    assert refusal('a <a href="x') == PREFIX + "Unclosed start tag at byte offset 2"


def test_invalid_custom_emoji_id() -> None:
    assert refusal('<tg-emoji emoji-id="abc">x</tg-emoji>') == PREFIX + "Invalid custom emoji identifier specified"


def test_a_surrogate_character_reference_is_refused() -> None:
    assert refusal("&#xD83D;") == PREFIX + (
        "Text contains invalid Unicode characters after decoding HTML entities, "
        "check for unmatched surrogate code units"
    )


# --- character references --------------------------------------------------------------------


def test_the_four_named_and_numeric_references_are_decoded() -> None:
    assert parse("&lt;b&gt; &amp; &quot;q&quot; &#65;&#x42;").text == '<b> & "q" AB'


def test_semicolon_is_optional() -> None:
    assert parse("&lt &amp").text == "< &"


def test_other_ampersands_are_kept_literally() -> None:
    # Telegram has no "unsupported entity" error: unknown names and bare & stay as typed.
    assert parse("a & b &nbsp; &copy; &#X41; &#;").text == "a & b &nbsp; &copy; &#X41; &#;"


# --- entities and lengths --------------------------------------------------------------------


def test_offsets_are_utf16_units_after_an_astral_emoji() -> None:
    assert parse("😀 <b>ok</b>").entities == [Entity("bold", 3, 2)]


def test_nested_entities_are_sorted_like_telegram() -> None:
    parsed = parse("<blockquote><i><b>x</b></i> y</blockquote>")
    assert parsed.entities == [Entity("blockquote", 0, 3), Entity("bold", 0, 1), Entity("italic", 0, 1)]


def test_visible_length_counts_utf16_units_of_the_visible_text() -> None:
    assert visible_length("<b>😀</b>") == 2
    assert visible_length("é&lt;") == 2
    assert visible_length('<a href="https://very.long.example.org/path">x</a>') == 1
    assert utf16_len("👍🏽") == 4


def test_visible_length_refuses_what_telegram_refuses() -> None:
    with pytest.raises(TelegramHTMLError):
        visible_length("a<br>b")


def test_max_text_is_telegrams_4096() -> None:
    assert MAX_TEXT == 4096


def test_fix_text_trims_like_telegram() -> None:
    assert fix_text(parse("\n  plain  \n")) == ParsedText("plain", [])
    assert fix_text(parse(" <b> x</b> \n")) == ParsedText(" x", [Entity("bold", 0, 2)])
    assert fix_text(parse("x<b>y  </b>  ")) == ParsedText("xy", [Entity("bold", 1, 1)])
    assert fix_text(parse(" \n ")) == ParsedText("", [])


def test_entity_to_api_carries_its_extra_field() -> None:
    assert Entity("text_link", 0, 1, "https://t.me").to_api() == {
        "type": "text_link", "offset": 0, "length": 1, "url": "https://t.me",
    }
    assert Entity("custom_emoji", 0, 2, "5").to_api()["custom_emoji_id"] == "5"
    assert Entity.from_api({"type": "bold", "offset": 1, "length": 2}) == Entity("bold", 1, 2)
