"""What every emulated chat or channel holds of its messages: those it shows, by id, and
those deleted (by the app or by a person) with what they showed last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class _Message(Protocol):
    @property
    def from_bot(self) -> bool: ...


K = TypeVar("K", int, str)
M = TypeVar("M", bound=_Message)


@dataclass(kw_only=True)
class ShownMessages(Generic[K, M]):
    messages: dict[K, M] = field(default_factory=dict)
    """Every message still there, by id."""
    deleted: dict[K, M] = field(default_factory=dict)
    """Messages deleted by the app or by a person, with what they showed last."""

    def present(self, *, others: bool = False) -> list[M]:
        """The app's messages still there, oldest first (ids grow); everyone's with ``others``."""
        return [self.messages[k] for k in sorted(self.messages) if others or self.messages[k].from_bot]


__all__ = ["ShownMessages"]
