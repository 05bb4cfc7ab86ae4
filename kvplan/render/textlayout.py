"""Unstyled table and text layout, byte for byte what kvplan's rich tables print without styles, without rich.

Output that carries no styles (a pipe, a file, CI logs: anything that is not a terminal) is written from here;
a terminal gets rich itself (bold titles and headers). Importing rich's console and table and laying out
``kvplan size``'s tables took ~25 ms of a ~90 ms run; this module does the same layout in ~1 ms.

It covers exactly the tables ``kvplan.render.output`` builds, and nothing else: a left-aligned title, a header row,
the ``SIMPLE_HEAD`` box (spaces for edges and dividers, a rule of ``─`` under the header), cell padding of one
space either side collapsed between columns (so the first column is padded ``1 + 1`` and every later one
``0 + 1``), columns left- or right-justified that fold words longer than the column, with a minimum width and
no maximum, and the table no wider than the output unless its minimums force it. The rules, as this module
implements them (rich 15, the release kvplan requires, lays them out so; rich 13 and 14 differ by a space here
and there; ``tests/test_textlayout.py`` renders every table of every command's golden output, and random
tables, both ways and asserts the same text, so a rich release that lays them out otherwise fails it):

- A text's *minimum* is its longest whitespace-separated word, its *maximum* its longest line. A cell adds its
  padding to both and is capped at the width on offer; a column is the widest of its cells (header included)
  capped at that width, then raised to its minimum width plus one.
- Columns start at their maximum. If the total exceeds the room (the output width less the box: two edges and
  one divider between columns), the widest columns shrink together toward the next widest until it fits,
  sharing each cut equally (rounded half to even, left to right). Each column is then measured again at its
  new width, which caps it there (or raises it to its minimum).
- A cell wraps at its column width less its padding: words (a run of spaces belongs to the word before it,
  leading spaces to the first word) go to the next line when they do not fit, a word longer than the line is
  cut into line-long pieces, and a line keeps trailing spaces unless they overflow. Left-justified lines are
  padded to the width; right-justified ones lose their trailing spaces and are padded on the left. The header
  row aligns to the bottom of its row, other rows to the top.
- Free text (notes, the explanation) wraps the same way at the output width, neither padded nor justified.

Anything outside that (tabs, control characters, characters that are not one cell wide, an encoding that
cannot print ``─``) is left to rich: ``plain_ok`` says whether this module may write the text.
"""

from __future__ import annotations

from dataclasses import dataclass

# Non-ASCII characters one cell wide in every terminal (and in rich's tables), printable and not spaces: Latin-1
# (less the soft hyphen), Greek, dashes, quotes and bullets, arrows, mathematical operators, box drawing and
# block elements; together they hold every non-ASCII character kvplan's own texts use.
_ONE_CELL_RANGES = ((0xA1, 0xFF), (0x391, 0x3C9), (0x2010, 0x2027), (0x2190, 0x22FF), (0x2500, 0x259F))
ONE_CELL = frozenset(chr(c) for a, b in _ONE_CELL_RANGES for c in range(a, b + 1)) - {"\xad", "\u03a2"}
RULE = "─"


def plain_ok(texts, encoding: str | None) -> bool:
    """Whether this module lays out ``texts`` exactly: printable one-cell characters and newlines only, and an
    output encoding that can write the header rule (rich falls back to ASCII boxes on other encodings)."""
    if not (encoding or "utf-8").lower().replace("_", "-").startswith("utf"):
        return False
    for t in texts:
        if t.isascii():
            if not t.replace("\n", "").isprintable():
                return False
        elif any(not (c.isascii() and (c.isprintable() or c == "\n")) and c not in ONE_CELL for c in t):
            return False
    return True


# --- measuring --------------------------------------------------------------------------------------------------
def text_range(text: str) -> tuple[int, int]:
    """(minimum, maximum) width of a text: its longest word, its longest line."""
    lines = text.splitlines()
    longest_line = max(map(len, lines)) if lines else 0
    words = text.split()
    return (max(map(len, words)) if words else longest_line), longest_line


def _capped(low: int, high: int, room: int) -> tuple[int, int]:
    """A (minimum, maximum) range made consistent (0 <= minimum <= maximum) and capped at ``room``; a range
    whose maximum falls below one is (0, 0)."""
    low = min(max(0, low), high)
    low, high = max(0, low), max(0, low, high)
    low, high = min(low, room), min(high, room)
    if high < 1:
        return 0, 0
    low = min(max(0, low), high)
    return max(0, low), max(0, low, high)


def cell_range(text: str, padding: int, room: int) -> tuple[int, int]:
    """(minimum, maximum) width of a padded cell with ``room`` columns on offer."""
    if room < 1:
        return 0, 0
    low, high = _capped(*text_range(text), room)   # (a room no wider than the padding: (room, room))
    return _capped(min(low + padding, room), min(high + padding, room), room)


@dataclass(frozen=True)
class Column:
    header: str
    right: bool          # right-justified (a number column)
    min_width: int       # including the cell's padding, as kvplan gives it
    first: bool          # the first column: padded on both sides

    @property
    def padding(self) -> int:
        return 2 if self.first else 1


def column_range(column: Column, cells: list[str], room: int) -> tuple[int, int]:
    """(minimum, maximum) width of a column (its cells and header) with ``room`` columns on offer."""
    if room < 1:
        return 0, 0
    ranges = [cell_range(t, column.padding, room) for t in [column.header, *cells]]
    low = max(r[0] for r in ranges)
    high = max(r[1] for r in ranges)
    low, high = min(low, room), min(high, room)
    floor = max(0, column.min_width + 1)   # the minimum width, plus the collapsed padding's one
    return max(low, floor), max(high, floor)


def _reduce(total: int, ratios: list[int], limits: list[int], values: list[int]) -> list[int]:
    """Take ``total`` from ``values`` in proportion to ``ratios``, at most ``limits[i]`` from each, left to right,
    each share rounded half to even."""
    ratios = [r if lim else 0 for r, lim in zip(ratios, limits, strict=True)]
    left_ratio = sum(ratios)
    if not left_ratio:
        return list(values)
    out = []
    for r, lim, v in zip(ratios, limits, values, strict=True):
        if r and left_ratio > 0:
            share = min(lim, round(r * total / left_ratio))
            out.append(v - share)
            total -= share
            left_ratio -= r
        else:
            out.append(v)
    return out


def _shrink_widest(widths: list[int], room: int) -> list[int]:
    """Narrow the widest columns toward the next widest until the total fits ``room`` (or cannot shrink)."""
    total = sum(widths)
    excess = total - room
    while total and excess > 0:
        widest = max(widths)
        second = max((w for w in widths if w != widest), default=0)
        ratios = [1 if w == widest else 0 for w in widths]   # (widest > second while total > 0)
        widths = _reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        total = sum(widths)
        excess = total - room
    return widths


def box_width(n_columns: int) -> int:
    """Columns the box adds: an edge each side and a divider between columns."""
    return 2 + n_columns - 1


def column_widths(columns: list[Column], rows: list[list[str]], width: int) -> list[int]:
    """Each column's width (padding included) in an output ``width`` columns wide."""
    room = width - box_width(len(columns))
    cells = [[row[i] for row in rows] for i in range(len(columns))]
    widths = [column_range(c, cs, room)[1] or 1 for c, cs in zip(columns, cells, strict=True)]
    if sum(widths) > room:
        # every kvplan column may wrap, so shrinking the widest reaches any room of 0 or more
        widths = _shrink_widest(widths, room)
        widths = [column_range(c, cs, w)[1] or 0 for c, cs, w in zip(columns, cells, widths, strict=True)]
    return widths


def table_minimum(columns: list[Column], rows: list[list[str]], width: int) -> int:
    """The narrowest the table can be laid out in ``width`` columns (rich's ``Table.__rich_measure__``)."""
    laid_out = sum(column_widths(columns, rows, width))
    cells = [[row[i] for row in rows] for i in range(len(columns))]
    return (sum(column_range(c, cs, laid_out)[0] for c, cs in zip(columns, cells, strict=True))
            + box_width(len(columns)))


# --- wrapping ---------------------------------------------------------------------------------------------------
def _words(line: str):
    """(start, word) for each word of a line: leading spaces join the first word, trailing ones each word."""
    i, n = 0, len(line)
    while i < n:
        start = i
        while i < n and line[i].isspace():
            i += 1
        if i == n:   # spaces with no word after them: not a word
            return
        while i < n and not line[i].isspace():
            i += 1
        while i < n and line[i].isspace():
            i += 1
        yield start, line[start:i]


def _breaks(line: str, width: int) -> list[int]:
    """Offsets at which ``line`` breaks to fit ``width`` columns, folding words longer than the width."""
    breaks: list[int] = []
    used = 0
    for start, word in _words(line):
        length = len(word.rstrip())
        if width - used >= length:
            used += len(word)
        elif length > width:   # fold: line-long pieces of the word, spaces included
            pieces = [word[k:k + width] for k in range(0, len(word), width)] if width > 0 else [word]
            for n, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if n == len(pieces) - 1:
                    used = len(piece)
                else:
                    start += len(piece)
        else:   # (not the first word: that one always fits or folds)
            breaks.append(start)
            used = len(word)
    return breaks


def wrap(text: str, width: int, justify: str | None) -> list[str]:
    """The lines of ``text`` wrapped at ``width``: ``justify`` "left" pads each to the width, "right" pads it on
    the left, None leaves it as wrapped."""
    out: list[str] = []
    for line in text.split("\n"):
        cuts = _breaks(line, width)
        pieces = [line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)], strict=True)]
        for piece in pieces:   # a piece overflows the width by trailing spaces at most: cropped below
            if justify == "left":
                piece = piece[:width].ljust(width)
            elif justify == "right":
                piece = piece.rstrip()[:width]
                piece = " " * (width - len(piece)) + piece
            out.append(piece[:max(width, 0)])
    return out


# --- rendering --------------------------------------------------------------------------------------------------
def table_lines(title: str, columns: list[Column], rows: list[list[str]], width: int) -> list[str]:
    """The table's lines as printed in an output ``width`` columns wide (each cropped to it)."""
    widths = column_widths(columns, rows, width)
    total = sum(widths) + box_width(len(columns))
    lines = wrap(title, total, "left") if title else []
    lines.append(" " * total)   # the top edge
    for n, cells in enumerate([[c.header for c in columns], *rows]):
        rendered = []
        for column, w, cell in zip(columns, widths, cells, strict=True):
            left = 1 if column.first else 0
            inner = w - column.padding
            rendered.append([" " * left + part + " " for part in wrap(cell, inner, "right" if column.right
                                                                      else "left")])
        height = max(len(r) for r in rendered)
        for k, (w, r) in enumerate(zip(widths, rendered, strict=True)):
            blank = [" " * w] * (height - len(r))
            rendered[k] = blank + r if n == 0 else r + blank   # the header sits at the bottom of its row
        lines += [" " + " ".join(r[i] for r in rendered) + " " for i in range(height)]
        if n == 0:
            lines.append(" " + RULE * (total - 2) + " ")
    lines.append(" " * total)   # the bottom edge
    return [line[:width] for line in lines]


def text_lines(text: str, width: int) -> list[str]:
    """Free text (a note, a chart, an explanation line) as printed in an output ``width`` columns wide."""
    return [line[:width] for line in wrap(text, width, None)]
