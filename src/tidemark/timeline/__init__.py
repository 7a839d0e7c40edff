"""The timeline: instants, their file names, instant-time generation."""

from tidemark.timeline.instant import Action, Instant, State, instant_file_name
from tidemark.timeline.instant_time import new_instant_time, parse_instant_time
from tidemark.timeline.timeline import Timeline

__all__ = [
    "Action",
    "Instant",
    "State",
    "Timeline",
    "instant_file_name",
    "new_instant_time",
    "parse_instant_time",
]
