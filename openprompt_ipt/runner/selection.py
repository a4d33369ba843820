"""Which split selects the checkpoint, and how results say so.

``held_out`` (default): the best epoch / sweep point is picked on dev; the reported split is never used
for selection. ``on_eval_set``: the IPT authors' released notebook protocol - the best-on-val
checkpoint's val score is reported as "test". Reproducible here only by asking for it, and labelled."""
from __future__ import annotations

from typing import Dict, Optional

ON_EVAL_SET_LABEL = "selected on the reported split (selection: on_eval_set)"


def label_result(result: Dict, selection: str) -> Dict:
    result["selection"] = selection
    if selection == "on_eval_set" and ON_EVAL_SET_LABEL not in result.get("test_split", ""):
        result["test_split"] = f"{result.get('test_split', 'test')}, {ON_EVAL_SET_LABEL}"
    return result


def split_with_cap(split: str, cap: Optional[Dict]) -> str:
    """The reported split's label, with ``dataset.max_eval``'s sample when it cut the split: 'official val,
    2,000 of 7,600 sampled by dataset.max_eval'. ``test_split`` itself stays as it was (tables group runs by it)."""
    if not cap:
        return split
    return f"{split}, {cap['kept']:,} of {cap['of']:,} sampled by dataset.max_eval"
