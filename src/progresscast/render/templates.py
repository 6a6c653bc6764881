"""Where the templates live, and the Jinja2 environments that load them (compiled once).

Lookup, in one place (`template_root`):

1. a `templates.dir` override, when given — files there win, anything it lacks falls
   back to the packaged templates (so a theme can override just `telegram/theme.j2`);
2. the repository's top-level `templates/` (a source checkout or editable install);
3. `progresscast/templates` inside the installed package (importlib.resources).

Autoescape is on for `telegram/` and `web/` (agent text arrives as plain str and is
escaped; already-built HTML is passed as `Markup`), off for `text/`.

Each channel has a `theme.j2` whose top-level `{% set %}` variables (icons, marks,
words) hold the wording; the renderers read them once per environment and count every
character they add, so a theme can change the wording without breaking any limit.
The frame templates (`telegram/draft.j2`, `text/draft.j2`, `web/card.j2`, …) receive
lines that are already fitted: they may add markup, not visible text.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, Template


def _autoescape(name: str | None) -> bool:
    return not (name or "").startswith("text/")


@lru_cache(maxsize=1)
def template_root() -> Path:
    """The packaged templates: the repository's `templates/`, else the installed copy."""
    repo = Path(__file__).resolve().parents[3] / "templates"
    if (repo / "telegram" / "draft.j2").is_file():
        return repo
    return Path(str(importlib.resources.files("progresscast") / "templates"))


@lru_cache(maxsize=16)
def _key(templates_dir: str | Path | None) -> str | None:
    """The override directory as one absolute path (resolved once, not per render)."""
    return str(Path(templates_dir).expanduser().resolve()) if templates_dir else None


def loader(templates_dir: str | Path | None = None) -> ChoiceLoader:
    """The one template lookup (renderers and web pages alike): the override directory's
    files first, then the packaged templates."""
    override = _key(templates_dir)
    loaders = [FileSystemLoader(override)] if override else []
    loaders.append(FileSystemLoader(str(template_root())))
    return ChoiceLoader(loaders)


@lru_cache(maxsize=8)
def _environment(override: str | None) -> Environment:
    return Environment(
        loader=loader(override),
        autoescape=_autoescape,
        undefined=StrictUndefined,
        keep_trailing_newline=False,
        auto_reload=False,
        cache_size=64,
    )


def template(name: str, templates_dir: str | Path | None = None) -> Template:
    return _template(name, _key(templates_dir))


@lru_cache(maxsize=64)
def _template(name: str, override: str | None) -> Template:
    return _environment(override).get_template(name)


@dataclass(frozen=True, eq=False)
class Theme:
    """A channel's wording. Compared (and hashed) by identity: themes are loaded once per
    template directory, and the renderers' caches key on them."""

    icons: dict[str, str]
    marks: dict[str, str]
    words: dict[str, str]

    def word(self, key: str, **values: Any) -> str:
        return self.words[key].format(**values) if values else self.words[key]


def theme(channel: str, templates_dir: str | Path | None = None) -> Theme:
    return _theme(channel, _key(templates_dir))


@lru_cache(maxsize=16)
def _theme(channel: str, override: str | None) -> Theme:
    """A channel's theme: the override's variables over the packaged ones."""
    base = _template(f"{channel}/theme.j2", None).module
    mine = _template(f"{channel}/theme.j2", override).module if override else base

    def merged(name: str) -> dict[str, str]:
        out = {str(k): str(v) for k, v in dict(getattr(base, name, {})).items()}
        out.update({str(k): str(v) for k, v in dict(getattr(mine, name, {})).items()})
        return out

    return Theme(icons=merged("icons"), marks=merged("marks"), words=merged("words"))
