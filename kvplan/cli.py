"""The command line: parse, call a calculator, render. Nothing is computed here.

Heavy modules (numpy, plotting, simulation) are imported inside the commands that use them, so
``kvplan --help`` and ``kvplan size`` start fast.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from typer.core import TyperGroup

from kvplan.errors import KvplanError

# Each command lives in its own module under kvplan.commands, which registers itself (``register(app)``); the
# table gives the listing order and the one-line help ``kvplan --help`` shows without building any command.
COMMANDS = {
    "size": ("size", "KV bytes per token and per request, per GPU."),
    "concurrency": ("concurrency", "How many long requests fit; overflow; tiers."),
    "compare-preemption": ("preemption", "Swap a preempted request, or recompute it?"),
    "tpot": ("tpot", "Time per output token over a long decode."),
    "pd": ("pd", "Does prefill/decode disaggregation pay?"),
    "simulate": ("simulate", "Simulate a request stream through the KV pool."),
    "explain-log": ("explain_log", "Explain an engine's start-up log; plan on its pool."),
    "calibrate": ("calibrate", "Fit kvplan to your own runs (logs, bench results, /metrics)."),
    "check": ("check", "Check deployment plans' assertions (exit 1 on a failure)."),
    "recommend": ("recommend", "The configuration table for this deployment, and engine flags."),
    "presets": ("presets", "List, show and template the presets."),
}
_built: dict = {}
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


class _LazyGroup(TyperGroup):
    """The top-level group: it lists every command from ``COMMANDS`` and builds (with typer) only the one a run
    invokes, so no run pays for every other command's options."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, name: str):
        return _build(name) if name in COMMANDS else None

    def format_commands(self, ctx, formatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])


def _build(name: str):
    """The click command of one kvplan command, built by typer from its module."""
    import importlib

    import typer.main

    if name not in _built:
        sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                          context_settings=HELP_OPTIONS)
        sub.callback()(lambda: None)   # a group, so the command keeps its name
        importlib.import_module(f"kvplan.commands.{COMMANDS[name][0]}").register(sub)
        command = typer.main.get_group(sub).commands[name]   # what get_command builds for a Typer with a callback
        _plain_coercion(command)
        _one_default(command)
        _built[name] = command
    return _built[name]


app = typer.Typer(
    cls=_LazyGroup,
    add_completion=True,
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvplan: plan the KV cache of LLM serving for the workload document's reasoning workload (long "
         "chain-of-thought: short prompts, 10K-100K-token decodes, KV that grows every step, preemption that is "
         "ruinous when it forces a recompute). Every figure explains itself with --explain.",
)


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__

        print(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _group(version: bool = typer.Option(False, "--version", help="Print kvplan's version and exit.",
                                        callback=_print_version, is_eager=True)) -> None:
    """kvplan: plan the KV cache of LLM serving for long chain-of-thought decode."""


def _one_default(command) -> None:
    """Help texts say their default in words ("(default h200)", "(default: every GPU ...)"); click's own
    "[default: h200]" would say it twice. Arguments show their metavar only (typer adds a Python type)."""
    for param in getattr(command, "params", ()):
        if "default" in (getattr(param, "help", None) or "").lower():
            param.show_default = False
        if getattr(param, "param_type_name", "") == "argument" and hasattr(param, "display_type_rich"):
            param.display_type_rich = lambda ctx: None   # its metavar says what it is, not "<list[Path]>"
    for sub in getattr(command, "commands", {}).values():   # a group's commands (kvplan presets list|show|...)
        _one_default(sub)


def _plain_coercion(command) -> None:
    """Every kvplan option takes text (kvplan parses it itself), a flag or a path. typer 0.29 coerces each value
    through a pydantic TypeAdapter, which imports pydantic's model machinery (~45 ms, more than the rest of a
    command); for these three types a plain coercion does the same job. Where typer's internals differ (another
    release), nothing is changed and typer's own coercion runs."""
    try:
        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover - a typer without the runtime-param layer
        return
    from pathlib import Path

    class Plain(RuntimeParam):
        def _coerce_value(self, value, param, ctx):
            kind = self.annotation
            if kind is bool:
                return bool(value)
            return Path(value) if kind is Path else str(value)

    from types import SimpleNamespace

    def walk(cmd) -> None:
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)
        params = list(getattr(cmd, "params", ()))
        if hasattr(cmd, "get_help_option"):  # the --help option is made on first use and cached; make it now
            params.append(cmd.get_help_option(SimpleNamespace(**HELP_OPTIONS)))
        for param in params:
            desc = getattr(param, "type_descriptor", None)
            if (desc is not None and hasattr(param, "_runtime_param") and desc.file_annotation is None
                    and desc.annotation in (str, bool, Path)):
                try:
                    param._runtime_param = Plain(parameter_info=desc.parameter_info, annotation=desc.annotation)
                except TypeError:  # pragma: no cover - a RuntimeParam with other fields
                    return

    walk(command)


def _prog_name() -> str:
    """What usage lines call the program: ``python -m kvplan`` when run as a module, else the script's name (click
    would name the module that is ``__main__``, e.g. ``python -m pytest`` when a test drives the CLI in-process)."""
    import os

    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name in ("kvplan.__main__", "kvplan"):
        return "python -m kvplan"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "kvplan"


def _replace_unencodable() -> None:
    """An output stream whose encoding is not UTF (PYTHONIOENCODING=ascii, a latin-1 locale) prints what it cannot
    hold as '?' rather than failing on the first bullet."""
    out = sys.stdout
    encoding = (getattr(out, "encoding", None) or "utf-8").lower().replace("_", "-")
    if not encoding.startswith("utf") and hasattr(out, "reconfigure"):
        try:
            out.reconfigure(errors="replace")
        except (OSError, ValueError):  # pragma: no cover - a stream that cannot be reconfigured
            pass


def _closed_pipe(exit_: SystemExit) -> bool:
    """Whether click's own handler turned a closed stdout (EPIPE: ``kvplan --help | true``) into exit 1."""
    import errno

    cause = exit_.__context__
    return exit_.code == 1 and isinstance(cause, OSError) and cause.errno == errno.EPIPE


def _output_failed(err: OSError) -> NoReturn:
    """A closed pipe (piped into head or true) is no error: exit 0; any other failure to write is exit 2."""
    from kvplan.render.output import quiet_stdout

    quiet_stdout()
    if isinstance(err, BrokenPipeError):
        sys.exit(0)
    print(f"error: cannot write the output: {err.strerror or err} (fix: check the disk, file or pipe it goes to)",
          file=sys.stderr)
    sys.exit(2)


def main() -> None:
    _replace_unencodable()
    try:
        import typer.main

        command = typer.main.get_command(app)
        _plain_coercion(command)
        try:
            code = command(standalone_mode=False, prog_name=_prog_name())
        except SystemExit as exit_:
            if _closed_pipe(exit_):
                raise BrokenPipeError from None
            raise
        sys.stdout.flush()   # a closed pipe or a full disk is found here, not in the interpreter's last flush
    except KvplanError as err:
        print(err.one_line(), file=sys.stderr)
        sys.exit(2)
    except OSError as err:  # inputs turn their OSErrors into KvplanError; what is left is the output failing
        _output_failed(err)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        if type(err).__name__ == "NoArgsIsHelpError" and hasattr(err, "format_message"):  # plain `kvplan`: the help
            try:
                print(err.format_message(), flush=True)
            except OSError as out_err:
                _output_failed(out_err)
            sys.exit(0)
        if getattr(err, "exit_code", None) == 2 and hasattr(err, "format_message"):  # a usage error from typer
            ctx = getattr(err, "ctx", None)
            where = ctx.command_path if ctx is not None else "kvplan"
            print(f"error: {err.format_message()} (fix: see `{where} --help`)", file=sys.stderr)
            sys.exit(2)
        if type(err).__name__ == "Abort":
            sys.exit(130)
        # a bug, not bad input: say so in one line unless asked for the traceback
        if os.environ.get("KVPLAN_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err} (a kvplan bug; rerun with KVPLAN_DEBUG=1 and report "
              "the traceback)", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
