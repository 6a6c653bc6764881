"""`progresscast a2a ingest FILE|-`: JSON lines of A2A updates, applied line by line.

A line that is not JSON, or not an update, is counted as malformed and named by its
line number on stderr; every other line goes through the same ordering as a live
follower, so a shuffled file ends with the same card as the ordered one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TextIO

from ...model.card import CardError
from .apply import Source, UpdateApplier
from .mapping import parse_update
from .tally import Tally


async def ingest_lines(lines: Iterable[str], applier: UpdateApplier, *, errors: TextIO = sys.stderr) -> Tally:
    tally = Tally()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            update = parse_update(json.loads(line))
        except (json.JSONDecodeError, RecursionError):
            tally.add("malformed")
            print(f"progresscast: line {number}: not valid JSON", file=errors)
            continue
        except CardError as exc:
            tally.add("malformed")
            print(f"progresscast: line {number}: {exc}", file=errors)
            continue
        if update is None:
            tally.add("message")
            continue
        try:
            result = await applier.apply(update, Source.file)
        except CardError as exc:  # an owner we may not write (unknown agent, bad context id)
            tally.add("malformed")
            print(f"progresscast: line {number}: {exc}", file=errors)
            continue
        tally.record(result)
        if result.plan_problem:
            print(f"progresscast: line {number}: plan not applied: {result.plan_problem}", file=errors)
    return tally
