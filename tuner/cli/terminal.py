"""The CLI's tables at any terminal width (fewer columns below a width, a number never cut to fit), its text in any
terminal's encoding, and its progress bars."""

from __future__ import annotations

import codecs
import sys
from collections.abc import Collection, Mapping, Sequence

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


# What a stream that cannot encode a character writes instead (LANG=C, PYTHONIOENCODING=ascii): the plain spelling
# of the CLI's own symbols; any other character as its backslash escape (`plain_streams`).
PLAIN_SPELLING = {"×": "x", "µ": "u", "·": "*", "÷": "/", "−": "-", "–": "-", "—": "--", "Σ": "sum ", "Δ": "d",
                  "²": "^2", "≥": ">=", "≤": "<=", "±": "+-", "→": "->", "…": "...", "∞": "inf"}
PLAIN_ERRORS = "rooftune-plain"


def _plain(error: UnicodeEncodeError) -> tuple[str, int]:
    text = error.object[error.start:error.end]
    return "".join(PLAIN_SPELLING.get(c) or c.encode("ascii", "backslashreplace").decode() for c in text), error.end


codecs.register_error(PLAIN_ERRORS, _plain)


def plain_streams() -> None:
    """Standard output and error write what their encoding cannot hold in plain spelling (PLAIN_SPELLING), never
    raise UnicodeEncodeError (which, on a terminal of LANG=C, ended a command in a traceback at its first µ)."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors=PLAIN_ERRORS)


def width_table(console: Console, title: str, columns: Sequence[str], narrow: Sequence[str] | None = None,
                wide_at: int = 0, left: Collection[str] = (), wrap: Collection[str] = ()) -> Table:
    """A table of `columns` on a terminal of `wide_at` columns or more, else of the `narrow` ones (by
    default the same), borderless (the frame's columns go to the cells). Columns are right-justified
    but those in `left`, and never wrap but those in `wrap` (text, folded where a word is too long):
    so rich fits the terminal by wrapping the text rather than cutting a number to "…". Add rows
    with `add_cells`."""
    wide = console.width >= wide_at
    table = Table(title=title, box=box.HEAVY_HEAD if wide else None, pad_edge=wide)
    for col in columns if wide or narrow is None else narrow:
        table.add_column(col, justify="left" if col in left else "right", no_wrap=col not in wrap,
                         overflow="fold" if col in wrap else "ellipsis")
    return table


def add_cells(table: Table, cells: Mapping[str, str], style: str | None = None, end_section: bool = False) -> None:
    """One row of `table` from `cells` (column header -> text, a superset of the table's columns)."""
    table.add_row(*(cells[str(col.header)] for col in table.columns), style=style, end_section=end_section)


def narrow_note(console: Console, wide_at: int, hidden: str) -> None:
    """Below `wide_at` columns, say in a dim line what a wider terminal adds (`hidden`)."""
    if console.width < wide_at:
        console.print(f"(a terminal of {wide_at}+ columns also shows {hidden})", style="dim")


class RichReporter:
    """A sweep's progress as a rich progress bar: shapes done of listed, the current shape's phase."""

    def __init__(self, progress: Progress):
        self.progress, self.task = progress, None

    def start(self, total: int, done: int) -> None:
        self.task = self.progress.add_task("sweep", total=total, completed=done)

    def phase(self, shape, text: str) -> None:
        self.progress.update(self.task, description=f"{shape}: {text}")

    def finished(self, shape, seconds: float) -> None:
        self.progress.advance(self.task)
        self.progress.console.print(f"{shape}  {seconds:.1f} s")


def progress_bar(console: Console, transient: bool = False) -> Progress:
    """A rich progress bar (description, bar, done of total, elapsed) for `RichReporter`."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=console, transient=transient)
