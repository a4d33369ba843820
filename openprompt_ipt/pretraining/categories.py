"""Wikipedia's 13 top-level content categories, the label space of IPT's category pretraining.

Order = IPT appendix A.3 (Wikipedia's own Contents order: General reference first, the rest
alphabetical). A category's index in ``CATEGORIES`` is its class id in every export.
"""
from __future__ import annotations

import difflib
from typing import Iterable, List, Sequence

CATEGORIES = (
    "General reference",
    "Culture and the arts",
    "Geography and places",
    "Health and fitness",
    "History and events",
    "Human activities",
    "Mathematics and logic",
    "Natural and physical sciences",
    "People and self",
    "Philosophy and thinking",
    "Religion and belief systems",
    "Society and social sciences",
    "Technology and applied sciences",
)


def _key(name: str) -> str:
    return " ".join(str(name).lower().replace("_", " ").split())


def canonical_category(name: str, categories: Sequence[str] = CATEGORIES, where: str = "") -> str:
    """The canonical spelling of ``name`` (case / underscore / space insensitive), else one clear error."""
    lookup = {_key(c): c for c in categories}
    found = lookup.get(_key(name))
    if found is None:
        match = difflib.get_close_matches(_key(name), list(lookup), n=1, cutoff=0.5)
        hint = f" (did you mean '{lookup[match[0]]}'?)" if match else f" (valid: {list(categories)})"
        raise ValueError(f"{where}unknown category '{name}'{hint}")
    return found


def resolve_categories(names: Iterable[str] | None) -> List[str]:
    """A subset of the 13 (in the canonical order) or all of them when ``names`` is empty."""
    if not names:
        return list(CATEGORIES)
    wanted = {canonical_category(n, where="categories: ") for n in names}
    return [c for c in CATEGORIES if c in wanted]
