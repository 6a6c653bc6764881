"""What every platform's `channels.drafts.Renderers` shares: one destination's settings
and templates, how a run ended said in the platform's theme, and the snapshot — the
progress draft whatever the destination's mode. A platform (`*_payload.py`) adds how a
view becomes its draft, its answer and its ping."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from ..config.base import Mode, RenderSettings
from ..model.asks import Ask
from ..model.owners import Owner
from ..model.view import View
from .ending import end_line
from .payload import Payload
from .templates import theme


class DestinationRenderers(ABC):
    THEME: ClassVar[str]
    """The platform's theme (`telegram`, `slack`, …)."""

    def __init__(self, settings: RenderSettings, templates_dir: str | Path | None = None) -> None:
        self.settings = settings
        self.mode = settings.mode
        self.templates_dir = templates_dir

    @abstractmethod
    def draft_with(self, view: View, settings: RenderSettings) -> Payload | None:
        """The draft for this view with these settings (None: no draft)."""

    def draft(self, view: View) -> Payload | None:
        return self.draft_with(view, self.settings)

    def end_line(self, view: View) -> str | None:
        return end_line(view, theme(self.THEME, self.templates_dir))

    def snapshot_settings(self) -> RenderSettings:
        """The destination's settings for a snapshot: `progress` where the mode is `off`."""
        if self.settings.mode is Mode.off:
            return self.settings.model_copy(update={"mode": Mode.progress})
        return self.settings

    def ask(self, owner: Owner, ask: Ask) -> Payload | None:
        """An ask's message with its controls (`channels.asks`); None: the platform shows
        no asks (yet)."""
        return None

    def snapshot(self, view: View) -> Payload | None:
        """A one-off of the progress draft, whatever the destination's mode."""
        return self.draft_with(view, self.snapshot_settings())


__all__ = ["DestinationRenderers"]
