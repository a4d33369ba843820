"""Figures for tables and benchmarks: pyplot on the Agg backend (CI machines have no display) and a
finished figure as PNG bytes, so callers can write it atomically beside its table; the output checks and
writes of the figure and report scripts (an existing output is kept unless ``--overwrite``)."""
from __future__ import annotations

import io
import os


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, dpi: int = 120) -> bytes:
    """Lay out, render and close ``fig``."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    return buf.getvalue()


def check_stem(stem: str, flag: str = "--out", overwrite: bool = False) -> None:
    """Before the work: ``<stem>.md`` / ``.png`` can be written. A folder as the stem wrote the hidden
    files ``folder/.md`` and ``.png``; a file among the folders above was a traceback after the work; a
    figure already there (another run's) was replaced without a word: it needs ``--overwrite``."""
    from .run_dirs import check_output_folder

    if not os.path.basename(stem) or os.path.isdir(stem):
        example = os.path.join(stem, "figure")
        raise ValueError(f"{flag} '{stem}' is a folder: give an output stem, e.g. {example} "
                         f"(writes {example}.md and {example}.png)")
    check_output_folder(os.path.dirname(stem), flag, stem)
    if not overwrite:
        check_new_file([stem + ".md", stem + ".png"], flag)


def check_output_file(path: str, flag: str, overwrite: bool, also=()) -> None:
    """Before the work: the file ``path`` (and the files ``also`` beside it) can be written: not a folder, no file
    among its folders, and not there already unless ``overwrite``."""
    from .run_dirs import check_output_folder

    if os.path.isdir(path):
        raise ValueError(f"{flag} '{path}' is a folder: give a file name in it, e.g. {os.path.join(path, 'report.md')}")
    check_output_folder(os.path.dirname(path), flag, path)
    if not overwrite:
        check_new_file([path, *also], flag)


def check_new_file(paths, flag: str = "--out") -> None:
    """A finished output (a figure, a report) is kept unless the user says to replace it: a ValueError naming
    the first of ``paths`` that exists and the fix."""
    for path in paths:
        if os.path.lexists(path):
            raise ValueError(f"{flag}: '{path}' already exists: --overwrite replaces it, or give another {flag}")


def write_new_files(files, flag="--out", overwrite: bool = False) -> None:
    """``files`` ({path: bytes or text}, a figure before its table) written as one set
    (serialization.write_files_atomic); without ``overwrite`` a file that another process wrote since the
    check is kept, in one line as ``check_new_file``'s. ``flag``: the option, or {path: its option}."""
    from ..serialization import write_files_atomic

    try:
        write_files_atomic(files, replace=overwrite)
    except FileExistsError as e:
        flag = flag.get(e.filename, "--out") if isinstance(flag, dict) else flag
        raise ValueError(f"{flag}: '{e.filename}' was written by another process while this one ran: it is kept; "
                         f"--overwrite replaces it, or give another {flag}") from None


def write_table_and_plot(stem: str, markdown: str, png: bytes, overwrite: bool = False) -> None:
    """The CLI end of a figure script: ``<stem>.png`` and ``<stem>.md`` written as one set (a kill between them
    never pairs a new table with an old figure), the table shown. An existing one needs ``overwrite``."""
    write_new_files({stem + ".png": png, stem + ".md": markdown}, overwrite=overwrite)
    print(markdown)
    print(f"wrote {stem}.md, {stem}.png")
