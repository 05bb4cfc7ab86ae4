"""render.textlayout writes unstyled output with rich's layout without importing rich: pinned against rich itself.

Every table-format golden case (every command, 80 and 160 columns) is written both ways and must be the same
text; so must random tables and texts (Hypothesis) at random widths, and the narrowest layout rich measures.
"""

import io

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_golden import COMMANDS, ROOT  # tests/ is on sys.path (rootdir-less test modules)

from kvplan.render import output
from kvplan.render.textlayout import Column, plain_ok, table_lines, table_minimum, text_lines

rich_console = pytest.importorskip("rich.console")


def rich_text(blocks, width: int) -> str:
    out = io.StringIO()
    output.write_rich(blocks, out, width)
    return out.getvalue()


def plain_text(blocks, width: int) -> str:
    out = io.StringIO()
    output.write_plain(blocks, out, width)
    return out.getvalue()


@pytest.mark.parametrize("width", ["80", "160"])
@pytest.mark.parametrize("command", [c for c in COMMANDS if not c.endswith("-hub")])
def test_every_golden_table_is_what_rich_prints(run_cli, monkeypatch, command, width):
    seen = []
    real = output.write_plain

    def both(blocks, out, w):
        seen.append((blocks, w))
        real(blocks, out, w)

    monkeypatch.setattr(output, "write_plain", both)
    monkeypatch.setenv("COLUMNS", width)
    monkeypatch.chdir(ROOT)
    r = run_cli(*COMMANDS[command], "--explain") if command not in ("presets-list", "presets-gpus", "check") \
        else run_cli(*COMMANDS[command])
    assert r.code == 0, r.err
    assert len(seen) == 1, "the piped table format did not go through kvplan.render.textlayout"
    blocks, w = seen[0]
    assert w == int(width)
    assert any(b[0] == "table" for b in blocks)
    assert r.out == rich_text(blocks, w)


def test_a_wrapped_title_header_and_cells_match_rich():
    # a title wider than the table, a header that wraps, a long word folded, a number column, an empty cell
    columns = [Column("model", right=False, min_width=7, first=True),
               Column("cache per layer description", right=False, min_width=8, first=False),
               Column("B/token", right=True, min_width=9, first=False)]
    rows = [["deepseek-r1-seed-gqa-with-a-very-long-identifier", "GQA, 8 KV heads x 128 dims", "249,856 B"],
            ["qwen3", "", "1,024 B"]]
    blocks = [("headline", "first line"),
              ("table", "A title that is far longer than the table it sits on top of, so that it wraps", columns,
               rows),
              ("text", "• a note that is long enough to wrap at forty columns, with a-very-long-hyphenated-word")]
    for width in (30, 40, 57, 80):
        assert plain_text(blocks, width) == rich_text(blocks, width), width


def test_the_header_rule_and_edges():
    # Hand-laid. Column widths (padding included): max(longest text + padding, min_width + 1): first column
    # max(1 + 2, 3 + 1) = 4, second max(2 + 1, 4 + 1) = 5; the box adds 2 edges + 1 divider: 12 in all.
    # First column: " " + text left-justified in 4 - 2 = 2 + " "; second: text right-justified in 5 - 1 = 4 + " ".
    columns = [Column("a", right=False, min_width=3, first=True), Column("n", right=True, min_width=4, first=False)]
    lines = table_lines("", columns, [["x", "12"]], 80)
    edge, div = " ", " "
    assert lines == [" " * 12,
                     edge + " a  " + div + "   n " + edge,
                     " " + "─" * 10 + " ",
                     edge + " x  " + div + "  12 " + edge,
                     " " * 12]
    # and cropped to an output narrower than the table
    assert [len(line) for line in table_lines("", columns, [["x", "12"]], 10)] == [10] * 5


words = st.text(alphabet="abcxyz0123456789-,.()×≤", min_size=0, max_size=18)
cell = st.lists(words, min_size=0, max_size=5).map(" ".join)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 6))
    columns = [Column(draw(cell), right=draw(st.booleans()) and i > 0, min_width=draw(st.integers(2, 16)),
                      first=i == 0) for i in range(n)]
    rows = draw(st.lists(st.lists(cell, min_size=n, max_size=n), min_size=0, max_size=5))
    return draw(cell), columns, rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(20, 200))
def test_random_tables_match_rich(table, width):
    title, columns, rows = table
    # rich's own layout of a column narrower than its padding is not one kvplan prints
    assume(all(w - c.padding >= 1 for c, w in zip(columns, _widths(columns, rows, width), strict=True)))
    assert plain_text([("table", title, columns, rows)], width) == rich_text([("table", title, columns, rows)], width)
    rt = output._rich_table(title, columns, rows)
    console = rich_console.Console(file=io.StringIO(), width=width)
    assert table_minimum(columns, rows, width) == rt.__rich_measure__(console, console.options).minimum


def _widths(columns, rows, width):
    from kvplan.render.textlayout import column_widths

    return column_widths(columns, rows, width)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab -•█", max_size=60), min_size=1, max_size=4).map("\n".join),
       st.integers(5, 120))
def test_random_text_wraps_as_rich_wraps(text, width):
    assert plain_text([("text", text)], width) == rich_text([("text", text)], width)
    assert text_lines(text, width) == rich_text([("text", text)], width).split("\n")[:-1]


def test_what_is_left_to_rich():
    assert plain_ok(["plain ascii", "x × y ≤ z", "a\nb"], "utf-8")
    assert not plain_ok(["a\tb"], "utf-8")          # tabs: rich expands them
    assert not plain_ok(["a\rb"], "utf-8")          # control characters: rich strips them
    assert not plain_ok(["模型"], "utf-8")           # two cells wide
    assert not plain_ok(["e\u0301"], "utf-8")       # a combining accent: no cell of its own
    assert not plain_ok(["ascii"], "ascii")         # rich draws an ASCII box there
    assert plain_ok(["ascii"], None)                # a StringIO: rich assumes utf-8


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_rich(monkeypatch):
    from kvplan.render.result import Result, Table

    result = Result(command="t", headline="h", data={}, tables=[Table("T", ["a", "b"], [["x", "y"]])])
    calls = []
    monkeypatch.setattr(output, "write_plain", lambda *a: calls.append("plain"))
    monkeypatch.setattr(output, "write_rich", lambda *a: calls.append("rich"))
    output.print_table(result, file=_Tty())
    output.print_table(result, file=io.StringIO())
    output.print_table(Result(command="t", headline="模型", data={}, tables=[]), file=io.StringIO())
    assert calls == ["rich", "plain", "rich"]   # (tests/test_entry.py pins that a piped run never imports rich)


class _ClosedPipe(io.StringIO):
    def write(self, s: str) -> int:
        raise BrokenPipeError


def test_a_closed_pipe_under_rich_is_left_to_the_command_layer():
    # rich's own Console.on_broken_pipe points stdout at /dev/null and exits 1; kvplan's raises BrokenPipeError
    # for kvplan.cli to handle, as write_plain's plain write does
    with pytest.raises(BrokenPipeError):
        output.write_rich([("headline", "h"), ("text", "a note")], _ClosedPipe(), 80)


@pytest.mark.parametrize("text", ["", "   ", "a  bb", " lead", "two\nlines here", "x\n\n   \nlongest-word y"])
def test_text_range_is_richs_measure(text):
    from rich.text import Text

    from kvplan.render.textlayout import text_range

    console = rich_console.Console(file=io.StringIO(), width=80)
    assert text_range(text) == tuple(Text(text).__rich_measure__(console, console.options))
    # a whitespace-only text is as wide as its spaces, at its minimum too (it has no word)
    assert text_range("   ") == (3, 3)


def test_wide_characters_are_split_by_richs_measure():
    # Two cells per character: a table of CJK names is twice as wide on screen as its len(). Its parts must be
    # what rich can print without cropping: each part's narrowest layout, as rich measures it, within the margin
    # the split keeps (width - 6). By hand: the key column is 14 characters = 28 cells + 2 padding, each other
    # column 8 = 16 cells + 2; key + two others + 4 box columns = 30 + 36 + 4 = 70 <= 74, a third would be 88.
    # Counting len() instead (16 + 5 x 10 + 7 = 73) would put all six columns in one part.
    from kvplan.render.result import Table

    name = "模型名称很长的一个断言名字"            # 13 characters, 26 cells
    table = Table("T", ("assertion", "a", "b", "c", "d", "e"),
                  tuple((f"{name}{k}", *[name[:8]] * 5) for k in range(3)))
    parts = output.table_parts(table, "iec", 80)
    assert [[c.header for c in columns] for _, columns, _ in parts] == [
        ["assertion", "a", "b"], ["assertion", "c", "d"], ["assertion", "e"]]
    console = rich_console.Console(file=io.StringIO(), width=80)
    for title, columns, rows in parts:
        assert output._rich_table(title, columns, rows).__rich_measure__(console, console.options).minimum <= 74
