"""Options: declarations (:mod:`.options`) and the one resolver (:mod:`.resolve`)."""

from tidemark.config.options import OPTIONS, Option
from tidemark.config.resolve import WriteConfig, resolve_write_config, validate_keys

__all__ = ["OPTIONS", "Option", "WriteConfig", "resolve_write_config", "validate_keys"]
