"""The command line: parse, call a calculator, render. Nothing is computed here.

Heavy modules (numpy, plotting, simulation) are imported inside the commands that use them, so
``kvplan --help`` and ``kvplan size`` start fast.
"""

from __future__ import annotations

import os
import sys

import typer

from kvplan.errors import KvplanError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="kvplan: plan the KV cache of LLM serving for long chain-of-thought decode.",
)
def _register() -> None:
    """Each command group lives in its own module under kvplan.commands and registers itself here."""
    from kvplan.commands import concurrency, preemption, presets, size

    for module in (size, concurrency, preemption, presets):
        module.register(app)


_register()


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except KvplanError as err:
        print(err.one_line(), file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # e.g. piped into head
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # plain `kvplan`: the help, not an error
            print(err.format_message())
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
