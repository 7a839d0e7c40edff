"""Which storage options are secrets: never shown in errors, logs, metadata or ``tidemark show``."""

from __future__ import annotations

# Option names whose values are secrets (compared lower-case, as substrings).
_SECRET_MARKERS = ("secret", "password", "token", "access_key", "account_key", "sas", "credential")


def is_secret_option(name: str) -> bool:
    lowered = name.lower()
    if lowered.endswith("access_key_id"):
        return False  # a key id names the key; it is not the secret
    return any(marker in lowered for marker in _SECRET_MARKERS)
