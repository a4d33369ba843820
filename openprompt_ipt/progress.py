"""Our progress bars: ``tqdm.auto`` (a widget in a notebook), off where the caller says so (``show_progress``,
``verbose``, ``--quiet``), and otherwise as tqdm's own environment says: ``TQDM_DISABLE=1`` switches them off as it
does every tqdm bar. (tqdm reads it as the default of ``disable``, so a ``disable=False`` passed always overrode it.)"""
from __future__ import annotations


def bar(iterable=None, show: bool = True, **kwargs):
    from tqdm.auto import tqdm

    if not show:
        kwargs["disable"] = True
    return tqdm(iterable, **kwargs)
