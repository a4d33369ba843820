"""Accelerate glue: processes, devices, mixed precision, gradient all-reduce, gathering eval outputs.

``Runtime.create`` gives a plain single-process runtime unless the run was started by
``accelerate launch`` / ``torchrun`` (``WORLD_SIZE`` > 1) or asks for mixed precision; then an
``accelerate.Accelerator`` sets up the process group (gloo on CPU, NCCL on GPUs), the device of this
process and autocast.

Data parallelism is done here, not by wrapping the model in DDP: every process iterates the *same*
seeded loader of global batches (``train.batch_size`` is the global batch) and trains on its own
contiguous slice of each batch; the loss is summed over the slice and divided by the global examples of the
optimizer step (every batch of its accumulation window), so after an all-reduce (sum) of the gradients every
process holds exactly the gradient of the global batch mean, i.e. what one process would compute. Why not
DDP: the vocab tables use sparse embedding gradients (``nn.Embedding(sparse=True)`` + ``RowSparseAdam``),
which NCCL cannot all-reduce; here a sparse gradient is all-gathered as (row ids, rows) and coalesced, so it
stays sparse on every backend.
Gradient accumulation needs no ``no_sync``: gradients are reduced once per optimizer step. Resume
and data order are identical for any number of processes. Eval outputs are gathered from all
processes in batch order; slices are disjoint, so nothing is counted twice.
"""
from __future__ import annotations

import contextlib
import os
from typing import Dict, List, Sequence

import torch

MIXED_PRECISION = ("no", "bf16", "fp16")


def launched_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def resolve_device(device, key: str = "train.device") -> torch.device:
    """``auto`` (a GPU when there is one), or the device named; a name torch does not know (``gpu``) or a
    GPU this machine lacks was a RuntimeError / AssertionError traceback: a ValueError naming ``key``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{key} = {device!r} is not a device: give auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{key} = {device!r} but this machine has no CUDA GPU (torch.cuda.is_available() is False): "
                         "use cpu, or auto (a GPU when there is one)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"{key} = {device!r} but this machine has {torch.cuda.device_count()} GPU(s): "
                         f"give cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return dev


class Runtime:
    """Single process by default; see ``create``."""

    def __init__(self, device: torch.device, accelerator=None, mixed_precision: str = "no"):
        self.device, self.accelerator, self.mixed_precision = device, accelerator, mixed_precision
        self.rank = accelerator.process_index if accelerator else 0
        self.world_size = accelerator.num_processes if accelerator else 1
        self.is_main = self.rank == 0

    @classmethod
    def create(cls, device: str = "auto", mixed_precision: str = "no") -> "Runtime":
        mixed_precision = str(mixed_precision or "no")
        if mixed_precision == "no":  # `accelerate launch --mixed_precision X` sets this for the script
            mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no").lower()
        if mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed precision '{mixed_precision}' is not one of {list(MIXED_PRECISION)}")
        world = launched_world_size()
        if world == 1 and mixed_precision == "no":
            return cls(resolve_device(device))
        resolve_device(device)  # a name torch does not know, a GPU this machine lacks: one line
        cpu = device == "cpu" or not torch.cuda.is_available() or os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true")
        if mixed_precision == "fp16" and cpu:
            raise ValueError("mixed precision 'fp16' needs a CUDA GPU and this run is on CPU: use --mixed-precision "
                             "bf16 (CPU autocast) or no")
        if torch.cuda.is_available() and not cpu:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            if local >= torch.cuda.device_count():
                raise ValueError(f"{world} processes were launched but this machine has {torch.cuda.device_count()} "
                                 f"GPU(s) (process {local} has none): launch at most {torch.cuda.device_count()} "
                                 "processes per machine, or add --cpu")
        if mixed_precision == "bf16" and not cpu and not torch.cuda.is_bf16_supported():
            raise ValueError("mixed precision 'bf16' is not supported by this GPU: use fp16 or no")
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState

        if world == 1:  # one process runs run after run (a sweep, a notebook): each sets its own precision, and
            AcceleratorState._reset_state(reset_partial_state=True)  # accelerate's state is a process-wide singleton
        try:
            acc = Accelerator(cpu=cpu, mixed_precision=mixed_precision)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"accelerate cannot run with mixed precision '{mixed_precision}' on "
                             f"{'CPU' if cpu else 'GPU'} x {world}: {e}") from e
        return cls(acc.device, acc, mixed_precision)

    # ---------------------------------------------------------------- compute
    def autocast(self):
        return self.accelerator.autocast() if self.accelerator and self.mixed_precision != "no" else contextlib.nullcontext()

    def grad_scaler(self):
        return torch.amp.GradScaler(self.device.type) if self.mixed_precision == "fp16" else None

    def shard(self, batch: Dict):
        """This process's contiguous slice of a global batch, and the global batch size."""
        n = len(batch["label"])
        if self.world_size == 1:
            return batch, n
        bounds = [n * r // self.world_size for r in range(self.world_size + 1)]
        lo, hi = bounds[self.rank], bounds[self.rank + 1]
        return {k: (v[lo:hi] if isinstance(v, (torch.Tensor, list, tuple)) and len(v) == n else v)
                for k, v in batch.items()}, n

    # ---------------------------------------------------------------- communication
    def all_reduce_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum gradients over processes (each process's loss is already scaled by 1 / global batch)."""
        if self.world_size == 1:
            return
        import torch.distributed as dist

        dense = [p for p in params if not (p.grad is not None and p.grad.is_sparse) and not _sparse_param(p)]
        for p in dense:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if dense:
            flat = torch.cat([p.grad.reshape(-1) for p in dense])
            dist.all_reduce(flat)
            offset = 0
            for p in dense:
                n = p.grad.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        for p in params:
            if _sparse_param(p) or (p.grad is not None and p.grad.is_sparse):
                p.grad = self._all_reduce_sparse(p)

    def _all_reduce_sparse(self, p) -> torch.Tensor:
        import torch.distributed as dist

        if p.grad is None:
            rows, values = torch.zeros(0, dtype=torch.long, device=p.device), p.new_zeros((0,) + p.shape[1:])
        else:
            g = p.grad.coalesce()
            rows, values = g.indices()[0], g.values()
        sizes = [torch.zeros(1, dtype=torch.long, device=p.device) for _ in range(self.world_size)]
        dist.all_gather(sizes, torch.tensor([rows.numel()], device=p.device))
        most = int(max(s.item() for s in sizes))
        pad_rows = torch.zeros(most, dtype=torch.long, device=p.device)
        pad_vals = p.new_zeros((most,) + p.shape[1:])
        pad_rows[:rows.numel()], pad_vals[:rows.numel()] = rows, values
        all_rows = [torch.empty_like(pad_rows) for _ in range(self.world_size)]
        all_vals = [torch.empty_like(pad_vals) for _ in range(self.world_size)]
        dist.all_gather(all_rows, pad_rows)
        dist.all_gather(all_vals, pad_vals)
        keep = [slice(0, int(s.item())) for s in sizes]
        rows = torch.cat([r[k] for r, k in zip(all_rows, keep)])
        values = torch.cat([v[k] for v, k in zip(all_vals, keep)])
        return torch.sparse_coo_tensor(rows.unsqueeze(0), values, p.shape, check_invariants=False).coalesce()

    def sum(self, value: float) -> float:
        if self.world_size == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t.item())

    def gather_objects(self, items: List) -> List:
        """Every process's list, concatenated in rank order (on every process)."""
        if self.world_size == 1:
            return items
        from accelerate.utils import gather_object

        return gather_object(items)

    def barrier(self) -> None:
        if self.world_size == 1:
            return
        if self.device.type == "cpu":  # accelerate's wait_for_everyone passes device_ids=[local rank], which a
            import torch.distributed as dist  # CPU (gloo) job on a machine with fewer GPUs than processes turns
            dist.barrier()  # into "CUDA error: invalid device ordinal" (seen on a 1-GPU machine, 2 CPU processes)
        else:
            self.accelerator.wait_for_everyone()


def _sparse_param(p) -> bool:
    return getattr(p, "_ipt_sparse", False)


def mark_sparse(params: Sequence[torch.nn.Parameter]) -> None:
    """Remember which parameters get sparse gradients, so a process whose slice never touched one
    still joins its all-gather."""
    for p in params:
        p._ipt_sparse = True


def shutdown() -> None:
    """Leave the process group cleanly at the end of a run: a process that exits while gloo's
    threads still run is aborted ("terminate called without an active exception", SIGABRT)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()
