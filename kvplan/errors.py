"""User-facing errors: one line naming the problem, one hint naming a fix."""

from __future__ import annotations


class KvplanError(Exception):
    """An input the user can fix. The CLI prints it on one line and exits 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        if self.hint:
            return f"error: {self.message} (fix: {self.hint})"
        return f"error: {self.message}"
