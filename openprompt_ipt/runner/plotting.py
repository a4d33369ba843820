"""Figures for tables and benchmarks: pyplot on the Agg backend (CI machines have no display) and a
finished figure as PNG bytes, so callers can write it atomically beside its table."""
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


def check_stem(stem: str, flag: str = "--out") -> None:
    """Before the work: ``<stem>.md`` / ``.png`` can be written. A folder as the stem wrote the hidden
    files ``folder/.md`` and ``.png``; a file among the folders above was a traceback after the work."""
    from .run_dirs import check_output_folder

    if not os.path.basename(stem) or os.path.isdir(stem):
        example = os.path.join(stem, "figure")
        raise ValueError(f"{flag} '{stem}' is a folder: give an output stem, e.g. {example} "
                         f"(writes {example}.md and {example}.png)")
    check_output_folder(os.path.dirname(stem), flag, stem)


def write_table_and_plot(stem: str, markdown: str, png: bytes) -> None:
    """The CLI end of a figure script: ``<stem>.md`` and ``<stem>.png`` written atomically, the table shown."""
    from ..serialization import write_bytes_atomic, write_text_atomic

    write_text_atomic(stem + ".md", markdown)
    write_bytes_atomic(stem + ".png", png)
    print(markdown)
    print(f"wrote {stem}.md, {stem}.png")
