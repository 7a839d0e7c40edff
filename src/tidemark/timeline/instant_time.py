"""Instant-time generation: millisecond times that only ever go up.

A new time is strictly greater than every time this process produced and than
``floor`` (the largest time already on the timeline), so a writer can never
reuse or go back in time even if the wall clock does.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

_FORMAT = "%Y%m%d%H%M%S"
_lock = threading.Lock()
_last: datetime | None = None


def format_instant_time(moment: datetime) -> str:
    return moment.strftime(_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(text: str) -> datetime:
    """Parse a 17-digit (or 14-digit) instant time as UTC."""
    if len(text) not in (14, 17) or not text.isdigit():
        raise ValueError(f"not an instant time: {text!r} (expected yyyyMMddHHmmssSSS)")
    # Fields by position (strptime costs ~20 us, under the commit lock); datetime checks the ranges.
    try:
        return datetime(int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12]),
                        int(text[12:14]), int(text[14:] or 0) * 1000, tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"not an instant time: {text!r} ({exc})") from None


def new_instant_time(floor: str | None = None) -> str:
    """A time later than ``floor`` and than every time this process generated before."""
    global _last
    with _lock:
        clock = datetime.now(UTC)
        now = clock.replace(microsecond=(clock.microsecond // 1000) * 1000)
        candidates = [now]
        if _last is not None:
            candidates.append(_last + timedelta(milliseconds=1))
        if floor:
            candidates.append(parse_instant_time(floor) + timedelta(milliseconds=1))
        chosen = max(candidates)
        _last = chosen
        return format_instant_time(chosen)
