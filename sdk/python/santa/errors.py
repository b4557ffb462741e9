"""The one exception type of the SDK."""

from __future__ import annotations

import errno

#: `index` of an error that names no item of a batch.
NO_INDEX = 0xFFFFFFFF


class SantaError(Exception):
    """A refused message: the daemon's ERROR reply, or one this SDK refuses.

    `code` is a Linux errno value (compare with the `errno` module's
    constants), `index` the offending item of a batch or NO_INDEX, and
    `message` text for people.
    """

    def __init__(self, code: int, index: int, message: str) -> None:
        name = errno.errorcode.get(code, str(code))
        where = "" if index == NO_INDEX else f" (item {index})"
        super().__init__(f"{name}{where}: {message}")
        self.code = code
        self.index = index
        self.message = message
