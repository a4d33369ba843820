"""Figures for tables and benchmarks: pyplot on the Agg backend (CI machines have no display) and a
finished figure as PNG bytes, so callers can write it atomically beside its table."""
from __future__ import annotations

import io


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


def write_table_and_plot(stem: str, markdown: str, png: bytes) -> None:
    """The CLI end of a figure script: ``<stem>.md`` and ``<stem>.png`` written atomically, the table shown."""
    from ..serialization import write_bytes_atomic, write_text_atomic

    write_text_atomic(stem + ".md", markdown)
    write_bytes_atomic(stem + ".png", png)
    print(markdown)
    print(f"wrote {stem}.md, {stem}.png")
