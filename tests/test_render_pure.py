"""Renderers are pure: the payload for a (view, settings) pair is the same whatever
was rendered before it. The renderers cache pieces (step ranks, line choice, lines,
each line's HTML, Markdown) keyed by what decides them; a key that misses an input
shows up here as a warm render that differs from a cold one.

Cold means every `functools.lru_cache` in the render package emptied (found by
walking the modules, so a cache added later is covered without listing it here) but
the template loader's: those are keyed by the template's name and the override
directory, which no render here varies, and emptied they made every cold pass
recompile every template (most of this file's time, none of what it checks)."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import progresscast.render as render_pkg
from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, Status, Step
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_rich, render_slack, render_telegram, render_text, render_web
from test_render_properties import render_settings, views


def _caches() -> list[Any]:
    found = []
    for info in pkgutil.iter_modules(render_pkg.__path__):
        if info.name == "templates":
            continue
        module = importlib.import_module(f"{render_pkg.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper) and value.__module__ == module.__name__:
                found.append(value)
    return found


def _clear() -> None:
    for cache in _caches():
        cache.cache_clear()


def _all_payloads(view: View, s: RenderSettings) -> list[Any]:
    classic = s.model_copy(update={"rich": False})
    rich = s.model_copy(update={"rich": True})
    return [
        render_text(view, s),
        render_telegram(view, classic),
        render_telegram(view, rich),
        render_rich(view, rich),
        render_slack(view, classic),
        render_slack(view, rich),
        render_web(view, s),
    ]


def _view(steps: list[tuple[str, str]], *, paused: bool = False, headline: str | None = None) -> View:
    owner = Owner("main", "ticket-4821")
    # built without validation: a write refuses a step of control characters only
    # (`\x00`), but a card stored before that rule still has to render the same way
    plan = [Step.model_construct(step=text, status=Status(status), note=None) for text, status in steps]
    card = Card(
        sessionKey=owner.session_key, agentId=owner.agent_id, displayKey=owner.display_key, revision=1,
        plan=plan, markdown=None, updatedAt="2026-06-01T00:00:00Z",
    )
    return View(owner=owner, card=card, activity=Activity(headline=headline), run=RunState.active, paused=paused)


ONE_LINE = RenderSettings(mode=Mode.progress, maxLines=1, maxLineChars=20)
NUL_STEP = _view([("\x00", "in_progress")])
# Same statuses, steps and lines as NUL_STEP but other text / pause: warm caches that a
# key missing the step text, the paused flag or the limits would answer from.
NEIGHBOURS = [
    (_view([("x", "in_progress")]), ONE_LINE),
    (_view([("\x00", "in_progress")], paused=True), ONE_LINE),
    (_view([("\x00 x", "in_progress")]), ONE_LINE),
    (NUL_STEP, ONE_LINE.model_copy(update={"maxLines": 2})),
    (NUL_STEP, ONE_LINE.model_copy(update={"maxLineChars": 40})),
    (NUL_STEP, ONE_LINE.model_copy(update={"mode": Mode.partial})),
]


def _warm_then_cold(warm: list[tuple[View, RenderSettings]], targets: list[tuple[View, RenderSettings]]) -> None:
    _clear()
    for view, s in warm:
        _all_payloads(view, s)
    hot = [_all_payloads(view, s) for view, s in targets]
    _clear()
    cold = [_all_payloads(view, s) for view, s in targets]
    for (view, s), a, b in zip(targets, hot, cold, strict=True):
        assert a == b, (view, s)


def test_nul_step_at_one_line_is_the_same_warm_or_cold() -> None:
    _warm_then_cold(NEIGHBOURS, [(NUL_STEP, ONE_LINE)])
    _warm_then_cold([(NUL_STEP, ONE_LINE)], NEIGHBOURS)


def test_the_cache_walk_finds_the_render_caches() -> None:
    names = {f"{c.__module__}.{c.__qualname__}" for c in _caches()}
    assert "progresscast.render.draft_lines._step_line" in names
    assert "progresscast.render.telegram._free_spans_html" in names


pairs = st.tuples(views(), render_settings)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@example(warm=NEIGHBOURS, targets=[(NUL_STEP, ONE_LINE)])
@given(warm=st.lists(pairs, min_size=1, max_size=4), targets=st.lists(pairs, min_size=1, max_size=3))
def test_output_does_not_depend_on_what_was_rendered_before(
    warm: list[tuple[View, RenderSettings]], targets: list[tuple[View, RenderSettings]]
) -> None:
    # the warm views re-rendered with the targets' settings share texts and statuses
    # with different limits: the case a key without the settings gets wrong
    crossed = [(view, s) for view, _ in warm for _, s in targets[:1]]
    _warm_then_cold(warm + crossed, targets + crossed[:2])
