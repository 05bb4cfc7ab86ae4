"""A progress bar on stderr for long runs: shown only when stderr is a terminal and the work has already lasted
more than a second (rich, imported only then), so short runs and pipes print nothing."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.progress import Progress, TaskID

DELAY_SECONDS = 1.0


class LazyProgress:
    """Call with (done, total) as work advances; ``close()`` at the end. Draws nothing until ``DELAY_SECONDS``."""

    def __init__(self, description: str, stream=None, delay: float = DELAY_SECONDS) -> None:
        self.description = description
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.start = time.perf_counter()
        self.bar: Progress | None = None   # with its task, once drawn
        self.task: TaskID | None = None
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar, task = self.bar, self.task
        if bar is None or task is None:
            if time.perf_counter() - self.start < self.delay:
                return
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(console=Console(file=self.stream), transient=True)
            bar.start()
            task = bar.add_task(self.description, total=total)
            self.bar, self.task = bar, task
        bar.update(task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
