"""What the store refuses of a well-formed write: one exception, mapped to a 409 once."""

from __future__ import annotations

from ..model.card import CardError


class StoreError(CardError):
    """A well-formed write the store refuses (stale revision, reset in between)."""

    def __init__(self, field: str, rule: str, *, revision: int | None = None) -> None:
        super().__init__(field, rule)
        self.revision = revision
        """For a stale `expectedRevision`: the revision the card is at, to retry against."""


__all__ = ["StoreError"]
