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
