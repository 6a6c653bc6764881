"""Markdown notes: to Telegram lines (cached by content) and to sanitised web HTML."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from progresscast.render.markdown import markdown_lines, markdown_web_html


def texts(source: str) -> list[str]:
    return [line.text for line in markdown_lines(source)]


def test_blocks_become_lines() -> None:
    source = "# Head\n\npara *em*\nsecond line\n\n- a\n- b\n  1. c\n\n> q\n\n---\n\n| x | y |\n|---|---|\n| 1 | 2 |"
    assert texts(source) == [
        "Head", "", "para em", "second line", "", "• a", "• b", "  1. c", "", "q", "", "———", "", "x | y", "1 | 2",
    ]
    lines = markdown_lines(source)
    assert lines[0].spans[0].marks == ("b",)
    assert lines[9].block == "quote"


def test_code_blocks_are_pre_lines_with_a_language() -> None:
    lines = markdown_lines("```python extra\na < b\n\nc\n```")
    assert [(line.block, line.lang, line.text) for line in lines] == [
        ("pre", "python", "a < b"), ("pre", "python", ""), ("pre", "python", "c"),
    ]
    assert markdown_lines("```<script>\nx\n```")[0].lang is None


def test_raw_html_is_dropped_and_images_show_their_alt_text() -> None:
    assert texts("a <b>b</b> c\n\n<div>\nblock\n</div>\n\n![the alt](http://x/y.png)") == ["a b c", "", "the alt"]


@pytest.mark.parametrize(
    ("source", "href"),
    [
        ("[x](https://example.com)", "https://example.com"),
        ("[x](HTTP://EXAMPLE.COM)", "HTTP://EXAMPLE.COM"),
        ("<https://example.com/a>", "https://example.com/a"),
        ("[x](mailto:a@b.c)", None),
        ("[x](ftp://example.com)", None),
        ("[x](tg://user?id=1)", None),
        ("[x](/relative)", None),
        ("[x](https://e.com/" + "a" * 3000 + ")", None),
    ],
)
def test_only_http_links(source: str, href: str | None) -> None:
    spans = [s for line in markdown_lines(source) for s in line.spans]
    assert [s.href for s in spans if s.href] == ([href] if href else [])


def test_code_inside_formatting_loses_its_code_mark() -> None:
    (line,) = markdown_lines("**bold `code`** `alone` [`link`](https://e.com)")
    marks = [(s.text, s.marks, s.href) for s in line.spans]
    assert ("bold code", ("b",), None) in marks
    assert ("alone", ("code",), None) in marks
    assert ("link", (), "https://e.com") in marks


def test_conversion_is_cached_by_content() -> None:
    markdown_lines.cache_clear()
    source = "# cached " + "x" * 100
    first = markdown_lines(source)
    again = markdown_lines("".join(["# cached ", "x" * 100]))  # equal, not identical
    assert again is first
    assert markdown_lines.cache_info().hits >= 1


def test_control_characters_do_not_break_lines() -> None:
    # markdown-it turns NUL into U+FFFD (CommonMark's rule); the rest become spaces
    assert texts("a\u2028b\x00c\x1bd\x85e") == ["a b\ufffdc d e"]


# --- web -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "<a href='javascript:alert(1)'>x</a>",
        "<p style='color:red' onclick='x()'>p</p>",
        "<iframe src='https://evil'></iframe>",
        "![x](data:image/png;base64,AAAA)",
        "<svg><script>alert(1)</script></svg>",
        "<style>body{}</style>",
    ],
)
def test_web_html_keeps_no_active_content(source: str) -> None:
    html = markdown_web_html("text " + source)
    collector = _Tags()
    collector.feed(html)
    for tag, attrs in collector.tags:
        assert tag in {"p", "a", "code", "strong", "em"}, (tag, html)
        for name, value in attrs:
            assert name in ("href", "rel"), (name, html)
            if name == "href":
                assert (value or "").startswith(("http://", "https://", "mailto:")), html
    assert "<script" not in html.lower() and "<style" not in html.lower()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def test_web_html_keeps_ordinary_formatting() -> None:
    html = markdown_web_html("# H\n\n**b** *i* ~~s~~ `c` [l](https://e.com)\n\n- x\n\n```py\nq\n```")
    assert "<h3>H</h3>" in html
    assert "<strong>b</strong>" in html and "<em>i</em>" in html and "<s>s</s>" in html
    assert '<a href="https://e.com" rel="nofollow noopener noreferrer">l</a>' in html
    assert "<li>x</li>" in html and '<code class="language-py">' in html
