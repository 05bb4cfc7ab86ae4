"""The process entry point: ``python -m kvplan`` and the ``kvplan`` script (``kvplan.__main__:main``).

A run is short-lived and start-up allocates ~100,000 objects (mostly typer's and kvplan's modules, classes and
functions) of which nearly none are garbage, yet the cyclic collector scans them every 700 allocations: ~40
collections, 5-8 ms of a ~70 ms start-up here. So before anything is imported, the entry point raises the
first-generation threshold to ``GC_THRESHOLD``; cycles are still collected, every 100,000 allocations instead of
700.

When the command is done, the interpreter's shutdown collects garbage over every object the collector tracks
(~100,000 here, nearly none of them garbage) and tears the modules down: ~8 ms, more than kvplan's own run. So
the entry point ends by freezing them (``gc.freeze``: moved to the permanent generation, which no collection
scans) and exits as Python does: ``atexit`` handlers run, stdout and stderr are flushed, non-daemon threads are
joined, and the exit status is ``sys.exit``'s. What freezing skips is what ``os._exit`` would: objects still held
by a module are not finalized, so a file left open would lose its buffer. kvplan closes every file it writes
(``write_text``, ``with`` blocks; ``tests/test_entry.py`` checks a ``--junit`` report is whole).
``KVPLAN_FREEZE_AT_EXIT=off`` (or ``0``) leaves the shutdown as Python has it.

Only the process that runs the command line is tuned: importing ``kvplan`` or calling ``kvplan.cli.main`` from
Python changes nothing.
"""

import gc
import os

GC_THRESHOLD = 100_000

FREEZE_ENV = "KVPLAN_FREEZE_AT_EXIT"
_OFF = ("off", "0", "no", "false")


def freeze_at_exit() -> None:
    """Spare the interpreter's last collection the objects alive now (see above), unless switched off."""
    if os.environ.get(FREEZE_ENV, "").strip().lower() not in _OFF:
        gc.freeze()


def main() -> None:
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)
    from kvplan.cli import main as run

    try:
        run()
    finally:
        freeze_at_exit()


if __name__ == "__main__":
    main()
