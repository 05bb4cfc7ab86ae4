"""The process entry point: ``python -m kvplan`` and the ``kvplan`` script (``kvplan.__main__:main``).

A run is short-lived and start-up allocates ~100,000 objects (mostly typer's and kvplan's modules, classes and
functions) of which nearly none are garbage, yet the cyclic collector scans them every 700 allocations: ~40
collections, 5-8 ms of a ~70 ms start-up here. So before anything is imported, the entry point raises the
first-generation threshold to ``GC_THRESHOLD``; cycles are still collected, every 100,000 allocations instead of
700.

typer and click import modules that no kvplan run uses (``LAZY_MODULES``: compression, IP addresses, the locale,
signal enums, shell detection, ...), ~3 ms of a run. The entry point loads those lazily
(``importlib.util.LazyLoader``): the import binds a module object whose code runs on its first attribute access,
so a run that never touches one never executes it, and one that does (``textwrap`` for ``--help``) gets the
module as usual. Only the listed pure-Python modules are deferred; ``KVPLAN_LAZY_IMPORTS=off`` (or ``0``) imports
them eagerly.

When the command is done, the interpreter's own shutdown would tear down every module and object one by one
(~9 ms here, more than kvplan's whole run). The entry point instead flushes stdout and stderr, runs the ``atexit``
handlers, and ends the process with ``os._exit`` and the command's exit code (``exit_now``). Where that could
differ from a normal exit it does not: an exit code that is not a number (a message), a flush that fails, or a
thread still running take Python's normal way out; ``KVPLAN_FAST_EXIT=off`` (or ``0``) always does.

Only the process that runs the command line is tuned: importing ``kvplan`` or calling ``kvplan.cli.main`` from
Python changes nothing.
"""

import gc
import os
import sys

GC_THRESHOLD = 100_000

# Imported by typer / click at start-up, used by no kvplan command on its common paths (each is loaded on use).
LAZY_MODULES = frozenset({"bz2", "lzma", "ipaddress", "locale", "signal", "textwrap", "numbers", "shellingham"})
LAZY_ENV = "KVPLAN_LAZY_IMPORTS"
FAST_EXIT_ENV = "KVPLAN_FAST_EXIT"
_OFF = ("off", "0", "no", "false")


class _LazyFinder:
    """A meta-path finder that hands the modules of ``LAZY_MODULES`` to the normal finders and wraps a pure-Python
    module's loader in a ``LazyLoader``; every other name, and every other kind of module, is left alone."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in LAZY_MODULES:
            return None
        from importlib.machinery import SourceFileLoader
        from importlib.util import LazyLoader

        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if type(spec.loader) is SourceFileLoader:
                    spec.loader = LazyLoader(spec.loader)
                return spec
        return None


def lazy_imports() -> None:
    """Defer ``LAZY_MODULES`` in this process (idempotent), unless ``KVPLAN_LAZY_IMPORTS`` is off."""
    if os.environ.get(LAZY_ENV, "").strip().lower() in _OFF:
        return
    if _LazyFinder not in sys.meta_path:
        sys.meta_path.insert(0, _LazyFinder)


def exit_now(code) -> None:
    """End the process with ``code`` as ``sys.exit(code)`` would, without the interpreter's teardown: stdout and
    stderr flushed, the ``atexit`` handlers run, then ``os._exit``. Raises ``SystemExit(code)`` (Python's normal
    exit) when that is off, when ``code`` is not a number, when a flush fails, while another thread runs, or when
    Python is to stay interactive (``-i``)."""
    if code is None:
        code = 0
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)   # CPython's; without it, Python's own exit
    if (os.environ.get(FAST_EXIT_ENV, "").strip().lower() in _OFF or not isinstance(code, int)
            or run_exitfuncs is None or sys.flags.inspect or os.environ.get("PYTHONINSPECT")):
        raise SystemExit(code)   # python -i (or PYTHONINSPECT) would open its prompt after the command
    threading = sys.modules.get("threading")
    if threading is not None and any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()):
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stream: Python's own exit reports it as it always has
        raise SystemExit(code) from None
    run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a handler printed to a stream that is now broken
        pass
    os._exit(code & 0xFF)   # the status sys.exit(code) gives, for any whole number


def main() -> None:
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)
    lazy_imports()
    from kvplan.cli import main as run

    try:
        run()
    except SystemExit as done:
        exit_now(done.code)
    exit_now(0)


if __name__ == "__main__":
    main()
