"""A second device for CPU-only machines, for device checks in CI: tensors that hold CPU values and say they
are elsewhere.

They say ``meta``: a CPU-only torch refuses any tensor that says ``cuda`` in its C++ bindings (indexing, autograd:
"PyTorch is not linked with support for cuda devices", an abort in backward), while ``meta`` has a device guard
there. Inside ``fake_gpu()`` a factory given ``device=GPU`` and ``.to(GPU)`` make such tensors (a module's
``.to(GPU)`` too); every op runs on the CPU values, so outputs can be compared with a CPU run, and an op that
meets a GPU and a CPU tensor raises ``DeviceMismatch``, as CUDA would (0-dim CPU tensors and CPU index tensors
are allowed, as on CUDA). ``.numpy()`` refuses them as it refuses CUDA tensors; ``.tolist()``/``.item()`` read
the values; autograd and optimizers work. What this cannot check: the code's own ``device.type == "cuda"``
branches (autocast, GradScaler), CUDA kernels' own numerics, and ``.cuda()`` (not patched: code under test that
calls it fails here)."""
from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

GPU = torch.device("meta")
CPU = torch.device("cpu")
aten = torch.ops.aten
# ops whose index tensors may stay on the CPU when the indexed tensor is on a GPU
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default,
            aten._unsafe_index.Tensor}
# ops that read one tensor on one device and write another: no common device is needed
CROSS_DEVICE = {aten.copy_.default, aten._to_copy.default, aten.copy.default, aten._copy_from.default,
                aten._copy_from_and_resize.default}


class DeviceMismatch(RuntimeError):
    pass


class FakeGpuTensor(torch.Tensor):
    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(),
                                                   storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                   device=GPU, requires_grad=elem.requires_grad, layout=elem.layout)

    def __init__(self, elem):
        self.elem = elem

    def __repr__(self):
        return f"FakeGpuTensor({self.elem!r})"

    @property
    def is_meta(self):  # it stands for a CUDA tensor, which is not meta (the label is only for torch's C++ checks)
        return False

    def tolist(self):  # torch refuses it for any subclass; a CUDA tensor gives its values
        return self.elem.tolist()

    def numpy(self, *, force=False):  # CUDA's own refusal (``force=True`` copies it to the host)
        if force:
            return self.elem.numpy()
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                        "to host memory first.")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _device(t):
    return GPU if isinstance(t, FakeGpuTensor) else t.device


def _check(func, args, kwargs):
    if func in CROSS_DEVICE:
        return
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    if func in INDEXING:  # self and values must agree; the indices may be CPU tensors
        tensors = [args[0]] + ([args[2]] if len(args) > 2 and isinstance(args[2], torch.Tensor) else [])
    devices = {_device(t).type for t in tensors if not (t.dim() == 0 and _device(t).type == "cpu")}
    if len(devices) > 1:
        shapes = [(tuple(t.shape), str(_device(t))) for t in tensors]
        raise DeviceMismatch(f"{func}: tensors on different devices {shapes}")


def _wants_gpu(device) -> bool:
    return device is not None and torch.device(device).type == GPU.type


def _dispatch(func, args, kwargs):
    _check(func, args, kwargs)
    on_gpu = any(isinstance(t, FakeGpuTensor) for t in tree_flatten((args, kwargs))[0])
    if "device" in kwargs:
        on_gpu = _wants_gpu(kwargs["device"])
        kwargs = {**kwargs, "device": CPU if on_gpu else kwargs["device"]}
    elif func in (aten.copy_.default,):
        on_gpu = isinstance(args[0], FakeGpuTensor)
    inputs = tree_flatten((args, kwargs))[0]
    unwrap = lambda t: t.elem if isinstance(t, FakeGpuTensor) else t  # noqa: E731
    out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))

    def wrap(t):
        if not isinstance(t, torch.Tensor) or not on_gpu:
            return t
        for given in inputs:  # an in-place op returns its own argument
            if isinstance(given, FakeGpuTensor) and given.elem is t:
                return given
        return FakeGpuTensor(t)
    return tree_map(wrap, out)


class FakeGpuMode(TorchDispatchMode):  # sees factories too (no tensor argument to dispatch on)
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _target(args, kwargs):
    """The device a ``Tensor.to`` call names, or None."""
    named = {k: v for k, v in kwargs.items() if k in ("device", "dtype")}
    device, _, _, _ = torch._C._nn._parse_to(*[a for a in args if not isinstance(a, bool)], **named)
    return device


@contextlib.contextmanager
def fake_gpu():
    """Fake GPU tensors on: factories given ``device=GPU`` and ``.to(GPU)`` make them, and a CPU tensor meeting
    one raises ``DeviceMismatch``."""
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        other = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("other")
        if other is not None:  # .to(tensor): that tensor's device and dtype
            return to(self, _device(other), other.dtype, **{k: v for k, v in kwargs.items() if k != "other"})
        device = _target(args, kwargs)
        if device is not None and device.type == GPU.type and not isinstance(self, FakeGpuTensor):
            dtype = next((a for a in args if isinstance(a, torch.dtype)), kwargs.get("dtype"))
            return aten._to_copy.default(self, dtype=dtype or self.dtype, device=GPU)
        return real_to(self, *args, **kwargs)

    def on_gpu(real):  # autocast knows no "meta": ask it what it would answer on CUDA
        return lambda device_type=None, *a: real(*(("cuda" if device_type == GPU.type else device_type,) + a
                                                   if device_type is not None else a))

    patched = {"is_autocast_enabled": on_gpu(torch.is_autocast_enabled),
               "get_autocast_dtype": on_gpu(torch.get_autocast_dtype)}
    real = {name: getattr(torch, name) for name in patched}
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.Tensor.to = to
    vars(torch).update(patched)
    # a module's .to() keeps its Parameter objects, as a move to CUDA does (a subclass cannot take over .data);
    # swapping refuses a parameter still held by an autograd graph: compute CPU references under no_grad
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        with FakeGpuMode():
            yield
    finally:
        torch.Tensor.to = real_to
        vars(torch).update(real)
        torch.__future__.set_swap_module_params_on_conversion(swap)


def unavailable() -> str:
    """Why this torch cannot run the fake GPU ("" when it can): it leans on torch internals."""
    try:
        with fake_gpu():
            x = torch.ones(2, 3, device=GPU, requires_grad=True)
            (x * torch.arange(3.0).to(GPU)).sum().backward()
            module = torch.nn.Linear(3, 2).to(GPU)
            assert module.weight.device == GPU and x.grad.tolist() == [[0.0, 1.0, 2.0]] * 2
    except Exception as e:  # noqa: BLE001  (any failure means: skip, saying why)
        return f"the fake GPU does not run on torch {torch.__version__}: {type(e).__name__}: {e}"
    return ""
