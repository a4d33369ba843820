"""Shim and register with OpenPrompt when OpenPrompt is first imported, not when ``openprompt_ipt`` is.

Importing OpenPrompt costs seconds (``datasets``, its trainer, every PLM class); a command that only
parses its arguments or reads a config must not pay for it (issue #32). ``install()`` puts a
meta-path finder in front of the import system that wraps the loaders of ``openprompt`` and of our
packages OpenPrompt finds by name (``WATCHED``):

* before OpenPrompt's own code runs: ``compat.apply()`` (it cannot import on new transformers without);
  right after it: ``compat.apply_to_openprompt()`` (what patches OpenPrompt's own classes);
* after OpenPrompt, or one of our packages, has run: ``registry.register_ready``
  registers whatever is complete. A package still being imported (it is what imported OpenPrompt)
  is registered when it finishes, so ``import openprompt_ipt`` then ``from openprompt.prompts import
  load_template`` finds ``instance_wise`` whichever of the two was imported first.
"""
from __future__ import annotations

import importlib.abc
import sys

WATCHED = ("openprompt", "openprompt_ipt.openprompt.templates", "openprompt_ipt.openprompt.verbalizers")
finished = set()  # WATCHED modules whose code has run to the end in this process


class _Loader(importlib.abc.Loader):
    """The real loader, with the shims before and the registration after ``exec_module``."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        name = module.__name__
        if name == "openprompt":
            from . import compat

            compat.apply()
        self.inner.exec_module(module)
        if name == "openprompt":
            from . import compat

            compat.apply_to_openprompt()
        finished.add(name)
        from . import registry

        registry.register_ready(finished)

    def __getattr__(self, attr):  # get_data, get_resource_reader, is_package...: the real loader's
        return getattr(self.inner, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in WATCHED:
            return None
        for finder in sys.meta_path:  # the spec the import system would have found without us
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _Loader):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Idempotent. If OpenPrompt is already imported (on a transformers it imports on unshimmed), shim
    and register now, as importing the package always did."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    if "openprompt" in sys.modules and "openprompt" not in finished:
        from . import compat, registry

        compat.apply()
        compat.apply_to_openprompt()
        finished.add("openprompt")
        registry.register_ready(finished)
