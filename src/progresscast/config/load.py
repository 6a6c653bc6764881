"""Reading the config: a TOML file (or none) into `Settings`, each mistake said on one line."""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..model.validation import field_and_rule, field_path
from .errors import ConfigError, SettingError
from .settings import Settings


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The settings model a location inside the config points into."""
    model: type[BaseModel] = Settings
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field else None
        if inner is None:
            return None
        model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model in an annotation such as `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _unknown_setting(path: str | Path, loc: tuple[int | str, ...]) -> ConfigError:
    name = str(loc[-1])
    model = _model_at(loc[:-1])
    known = sorted(model.model_fields) if model else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" — did you mean `{close[0]}`?" if close else (f" (known here: {', '.join(known)})" if known else "")
    return ConfigError(f"config {path}: unknown setting `{field_path(loc)}`{hint}")


def _env_settings(data: Any, loc: tuple[int | str, ...] = ()) -> list[tuple[str, str]]:
    """(setting, NAME) of every `"env:NAME"` value in the raw config."""
    if isinstance(data, str):
        return [(field_path(loc), data[4:])] if data.startswith("env:") else []
    if isinstance(data, dict):
        return [found for key, value in data.items() for found in _env_settings(value, (*loc, key))]
    if isinstance(data, list):
        return [found for i, value in enumerate(data) for found in _env_settings(value, (*loc, i))]
    return []


def load_settings(path: str | Path | None = None) -> Settings:
    """Read a TOML config: `path`, else the file PROGRESSCAST_CONFIG names, else the defaults."""
    path = path or os.environ.get("PROGRESSCAST_CONFIG")
    if not path:
        return Settings()
    try:
        data: dict[str, Any] = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"config {path}: is a directory, not a TOML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path}: not valid TOML: {exc}") from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        unknown = [e for e in exc.errors(include_url=False) if e["type"] == "extra_forbidden"]
        if unknown:  # a misspelt key explains the "missing" one next to it
            raise _unknown_setting(path, tuple(unknown[0]["loc"])) from None
        field, rule = field_and_rule(exc)
        below = exc.errors(include_url=False)[0].get("ctx", {}).get("error")
        if isinstance(below, SettingError):  # name the setting itself, not the table it is in
            field, rule = f"{field}.{below.where}" if field else below.where, below.rule
        raise ConfigError(f"config {path}: {field}: {rule}") from None
    settings._source = str(path)
    from_env = _env_settings(data)
    settings._env_names = dict(from_env)
    settings._unset_env = [(field, name) for field, name in from_env if not os.environ.get(name)]
    return settings
