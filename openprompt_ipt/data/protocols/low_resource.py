"""Low-resource protocol (IDPG §4.4): K training examples (K in {100, 500, 1000} in the paper) and a
1000-example dev set, both sampled (seeded, disjoint) from the original train."""
from __future__ import annotations

import random
from typing import List, Sequence, Tuple


def low_resource_splits(pool: Sequence, k: int, dev_size: int, seed: int) -> Tuple[List, List]:
    if k + dev_size > len(pool):
        raise ValueError(f"protocol.k={k} + protocol.dev_size={dev_size} exceeds the {len(pool)} training "
                         "examples: lower protocol.k or protocol.dev_size")
    items = sorted(pool, key=lambda ex: str(ex.guid))
    random.Random(seed).shuffle(items)
    return items[:k], items[k:k + dev_size]
