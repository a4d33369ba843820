"""Adam for sparse embedding gradients whose state grows with the rows actually touched.

``torch.optim.SparseAdam`` updates only the looked-up rows but allocates both moment tensors for
the whole table (for roberta-large's 50,265 x 1,024 table: 400 MB of state nobody touches on a
small task). Here a row gets moment slots the first time a gradient reaches it, so step cost *and*
optimizer memory are proportional to the rows the data uses.

A touched row takes exactly ``torch.optim.AdamW``'s step (ε added after the bias correction, as AdamW; SparseAdam
adds it before, which differs from AdamW's step when gradients are small next to ε), with decoupled weight decay.
Bias corrections use the table's step count (its optimizer steps), as AdamW and SparseAdam do, not per-row counts:
a row met for the first time at step t moves as a dense AdamW would move it then. The lazy part: a row without
a gradient in a step does not move, neither by its old momentum nor by weight decay (dense AdamW moves every row
each step; decaying all 50k rows every step would cost what this class avoids).
"""
from __future__ import annotations

import torch


class RowSparseAdam(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
            raise ValueError(f"RowSparseAdam weight_decay must be a number >= 0 (got {weight_decay!r})")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("RowSparseAdam needs sparse gradients: build the embedding with sparse=True")
                grad = p.grad.coalesce()
                rows, values = grad.indices()[0], grad.values()
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["slot_of"] = torch.full((p.shape[0],), -1, dtype=torch.long, device=p.device)
                    state["exp_avg"] = p.new_zeros((0,) + p.shape[1:])
                    state["exp_avg_sq"] = p.new_zeros((0,) + p.shape[1:])
                slots = self._slots(state, rows)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m[slots] = m[slots] * b1 + values * (1 - b1)
                v[slots] = v[slots] * b2 + values * values * (1 - b2)
                step = state["step"]
                if group.get("weight_decay", 0.0):  # decoupled (AdamW): w <- w (1 - lr wd), touched rows only
                    p[rows] *= 1 - group["lr"] * group["weight_decay"]
                denom = v[slots].sqrt() / (1 - b2 ** step) ** 0.5 + group["eps"]  # AdamW's order, not SparseAdam's
                p[rows] -= group["lr"] / (1 - b1 ** step) * m[slots] / denom
        return loss

    @staticmethod
    def _slots(state, rows: torch.Tensor) -> torch.Tensor:
        """Slots of ``rows`` in the moment buffers; new rows get the next free slots. Buffers grow by
        doubling, so copying them is amortised instead of happening on every step that meets new rows."""
        slot_of = state["slot_of"]
        new = rows[slot_of[rows] < 0]
        if new.numel():
            used = state["used"] = state.get("used", 0)
            need = used + new.numel()
            if need > state["exp_avg"].shape[0]:
                capacity = max(need, 2 * state["exp_avg"].shape[0], 64)
                for key in ("exp_avg", "exp_avg_sq"):
                    grown = state[key].new_zeros((capacity,) + state[key].shape[1:])
                    grown[:used] = state[key][:used]
                    state[key] = grown
            slot_of[new] = torch.arange(used, need, device=rows.device)
            state["used"] = need
        return slot_of[rows]

    def load_state_dict(self, state_dict) -> None:
        """The base class casts every floating-point parameter's state tensors to the parameter's dtype:
        an integer row -> slot map cast to bf16/fp16 loses rows above 256/2048 (and the moments then mix
        across rows), so the map is kept out of what the base class sees and restored as int64."""
        maps, states = {}, {}
        for key, st in state_dict["state"].items():
            st = dict(st)
            if "slot_of" in st:
                maps[key] = st.pop("slot_of")
            states[key] = st
        super().load_state_dict({**state_dict, "state": states})
        # saved index -> parameter, paired in the order the base class pairs them
        saved = [i for g in state_dict["param_groups"] for i in g["params"]]
        params = [p for g in self.param_groups for p in g["params"]]
        for key, slot_of in maps.items():
            p = params[saved.index(key)]
            self.state[p]["slot_of"] = slot_of.to(device=p.device, dtype=torch.long)
        for state in self.state.values():
            for key in ("step", "used"):
                if key in state:
                    state[key] = int(state[key])

    @staticmethod
    def rows_with_state(optimizer) -> int:
        return sum(s.get("used", 0) for s in optimizer.state.values())
