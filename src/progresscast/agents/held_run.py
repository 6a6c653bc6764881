"""The run an agent connected over MCP holds, so its card reads as working.

A card written when the session has no active run shows its unfinished steps paused
(under the headline of the run that ended). An agent that talks to progresscast only
over MCP never says when it starts or stops, so the MCP server says it for it: before
a write, when the owner has no active run, it starts one (`mcp-…`) and holds it; when
the client goes, it ends the run it holds (completed), if that run is still the
current one. A run someone else started (a harness's hooks) is written in as it is,
and one of ours that they replaced is theirs to end.
"""

from __future__ import annotations

import logging
import uuid

from ..model.view import RunState
from .sinks import CardSink, SinkError

log = logging.getLogger("progresscast.agents.mcp")


class HeldRun:
    def __init__(self, sink: CardSink) -> None:
        self.sink = sink
        self.run_id: str | None = None
        """The run this server started last (None: none yet)."""

    async def before_write(self) -> None:
        """Make sure the write lands in an active run. Through a gateway the run's state is
        not read: the run started at the first write is held until the client goes."""
        active = await self.sink.run_active()
        if active or (active is None and self.run_id is not None):
            return
        run_id = f"mcp-{uuid.uuid4().hex[:16]}"
        # Held before it is started: a stop (SIGTERM, Ctrl-C) that cancels the start after
        # Redis made it still ends it in `release` (ending a run that never began does nothing).
        self.run_id = run_id
        try:
            await self.sink.start_run(run_id)
        except SinkError:
            self.run_id = None
            raise

    async def release(self) -> None:
        """The client went: end the run it held (never raises)."""
        run_id, self.run_id = self.run_id, None
        if run_id is None:
            return
        try:
            await self.sink.end_run(run_id, RunState.completed)
        except SinkError as exc:
            log.warning("could not end run %s of %s: %s", run_id, self.sink.owner.display_key, exc)


__all__ = ["HeldRun"]
