"""The output options' checks and ``emit``: a command's ``Result`` rendered in the chosen format, a closed pipe
or a full disk turned into a clean exit or a one-line error."""

from __future__ import annotations

from kvplan.errors import KvplanError


def check_format(fmt: str) -> str:
    from kvplan.render.output import FORMATS

    if fmt not in FORMATS:
        raise KvplanError(f"unknown format {fmt!r}", "choose one of " + ", ".join(FORMATS))
    return fmt


def check_units(units: str) -> str:
    if units not in ("iec", "si"):
        raise KvplanError(f"unknown unit system {units!r}", "choose iec (GiB) or si (GB)")
    return units


def check_output_options(fmt: str, units: str, brief: bool) -> str:
    """Checked before any work, so a bad --format fails fast."""
    fmt = check_format(fmt)
    check_units(units)
    check_brief(fmt, brief)
    return fmt


def check_brief(fmt: str, brief: bool) -> None:
    if brief and fmt not in ("table", "json"):
        raise KvplanError(f"--brief prints the headline figures as a table or JSON, not {fmt}",
                          "drop --brief, or give --format table or json")


def emit(result, fmt: str, explain: bool, units: str, brief: bool) -> None:
    from kvplan.render.output import render

    if brief and explain:
        raise KvplanError("--brief and --explain both given", "drop one: --brief prints the headline figures only")
    if explain and fmt == "csv":   # one table of raw numbers: no place for the derivations, so it would be dropped
        raise KvplanError("--explain prints each figure's derivation, which -f csv (one table of raw numbers) cannot "
                          "hold", "drop --explain, or give --format table, markdown or json (JSON always carries "
                              "them)")
    check_brief(fmt, brief)
    try:
        render(result, fmt, explain, units=units, brief=brief)
    except BrokenPipeError:  # piped into head: the reader has what it wanted, not an error
        from kvplan.render.output import quiet_stdout

        quiet_stdout()
        raise SystemExit(0) from None
    except OSError as err:  # a full disk, a closed file
        from kvplan.render.output import quiet_stdout

        quiet_stdout()
        raise KvplanError(f"cannot write the output: {err.strerror or err}",
                          "check the disk, file or pipe it goes to") from None
