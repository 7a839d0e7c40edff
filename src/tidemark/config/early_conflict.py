"""The settings of early conflict detection: the strategy and the options that tune it.

Resolved from ``hoodie.write.concurrency.early.conflict.*`` by :mod:`tidemark.config.resolve`
and carried, picklable, to the tasks in the write's marker spec; the detection itself is
:mod:`tidemark.markers.early_conflict`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from tidemark.errors import ConfigError


class DetectionStrategy(str, enum.Enum):
    SIMPLE_DIRECT = "simple_direct"
    TRANSACTIONAL_DIRECT = "transactional_direct"
    ASYNC_TIMELINE_SERVER = "async_timeline_server"

    @property
    def uses_direct_markers(self) -> bool:
        return self is not DetectionStrategy.ASYNC_TIMELINE_SERVER


# Hudi's class names, so Hudi users' settings work as they are.
_HUDI_CLASSES = {
    "org.apache.hudi.table.marker.SimpleDirectMarkerBasedDetectionStrategy": DetectionStrategy.SIMPLE_DIRECT,
    "org.apache.hudi.table.marker.SimpleTransactionDirectMarkerBasedDetectionStrategy": (
        DetectionStrategy.TRANSACTIONAL_DIRECT
    ),
    "org.apache.hudi.timeline.service.handlers.marker.AsyncTimelineServerBasedDetectionStrategy": (
        DetectionStrategy.ASYNC_TIMELINE_SERVER
    ),
}


def parse_detection_strategy(value: str) -> DetectionStrategy:
    text = str(value).strip()
    if text in _HUDI_CLASSES:
        return _HUDI_CLASSES[text]
    try:
        return DetectionStrategy(text.lower())
    except ValueError:
        names = ", ".join(s.value for s in DetectionStrategy)
        raise ValueError(f"expected one of {names} (or Hudi's class name)") from None


@dataclass(frozen=True)
class EarlyConflictSettings:
    """How one write detects conflicts early; picklable (it travels to the tasks)."""

    strategy: DetectionStrategy
    check_commit_conflict: bool = False
    heartbeat_expiry_ms: int = 120_000
    async_initial_delay_ms: int = 0
    async_period_ms: int = 30_000
    # Set per write once its instant exists:
    instant_time: str = ""
    seen: frozenset[str] = frozenset()  # instants completed in the snapshot the write planned against

    def for_write(self, instant_time: str, seen: frozenset[str]) -> EarlyConflictSettings:
        return replace(self, instant_time=instant_time, seen=seen)


def validate(settings: EarlyConflictSettings, marker_type: str) -> None:
    """Strategy and marker type must fit together (raises ConfigError)."""
    server = marker_type == "TIMELINE_SERVER_BASED"
    if settings.strategy.uses_direct_markers and server:
        raise ConfigError(
            f"early conflict detection strategy {settings.strategy.value} works on direct markers; "
            "set hoodie.write.markers.type=DIRECT or use async_timeline_server",
            key="hoodie.write.concurrency.early.conflict.detection.strategy",
        )
    if not settings.strategy.uses_direct_markers and not server:
        raise ConfigError(
            "early conflict detection strategy async_timeline_server needs the marker server: "
            "set hoodie.write.markers.type=TIMELINE_SERVER_BASED or use simple_direct / transactional_direct",
            key="hoodie.write.concurrency.early.conflict.detection.strategy",
        )
