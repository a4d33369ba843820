"""Per-forward state kept apart for each thread: a web server's sync endpoints (FastAPI / Starlette, gradio, Flask
threaded) call one model from several threads at once, and PyTorch releases the GIL inside its ops, so two forwards
interleave. A plan armed on an injector the PLM's layers share (or a template's spliced positions) was one attribute
for every thread: thread B's forward replaced thread A's plan, or disarmed it, while A's layers still ran, and A got
B's prompts or none (wrong logits, without a word). Here each thread sees its own value.

Gradient checkpointing's recompute may run in another thread (autograd's device thread, in the backward): it does not
read this state where it runs, but the plans its forward ran with, carried in (``checkpointing.PromptCarrier``) and
armed in whichever thread the recompute runs (``checkpointing.armed``)."""
from __future__ import annotations

import threading


class ThreadState:
    """A ``threading.local`` that a copy of its owner (``copy.deepcopy``, pickling) gets anew, empty: a forward's
    state belongs to the forward, never to a copy (a ``threading.local`` itself cannot be copied or pickled)."""

    def __init__(self):
        self.local = threading.local()

    def __deepcopy__(self, memo):
        return ThreadState()

    def __reduce__(self):
        return ThreadState, ()


STATE = "_thread_state"
PINNED = "_pinned_per_thread"  # name -> value: what a copy nn.DataParallel made reads, whichever thread runs it


def thread_state(owner) -> threading.local:
    """``owner``'s per-thread namespace, made at first use (also on objects unpickled from an earlier release)."""
    state = owner.__dict__.get(STATE)
    if state is None:
        state = owner.__dict__.setdefault(STATE, ThreadState())  # setdefault: one object, whichever thread comes first
    return state.local


class PerThread:
    """An attribute whose value each thread sets and reads for itself (``default`` in a thread that never set it)."""

    def __init__(self, default=None):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        pinned = obj.__dict__.get(PINNED)
        if pinned is not None and self.name in pinned:
            return pinned[self.name]
        return getattr(thread_state(obj), self.name, self.default)

    def __set__(self, obj, value):
        setattr(thread_state(obj), self.name, value)


def pin(original, replica, names) -> None:
    """``nn.DataParallel`` copies a module in the calling thread and runs each copy's forward in a thread of its own:
    ``replica`` reads, for each of ``names``, the value the calling thread sees on ``original`` (a switch it set with
    a ``with`` block around the call)."""
    replica.__dict__[PINNED] = {name: getattr(original, name) for name in names}
