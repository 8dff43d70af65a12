"""The types an operation's arguments and reports take, beside the library's result types."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

#: a point in time as the library takes it: ISO 8601 text, epoch seconds or a datetime
When = str | float | datetime
#: free-form metadata a caller sends with a memory or an exchange
Metadata = Mapping[str, object]
#: a report as JSON reads it (health, the store's figures, the persona's sections): nested values of any JSON type
JsonReport = dict[str, Any]


__all__ = ["JsonReport", "Metadata", "When"]
