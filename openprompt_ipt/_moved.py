"""Old import paths of the runner modules, kept for one release (0.2 removes them).

``openprompt_ipt.config`` (and experiment, runs, sweep, aggregate, plotting, plm, predict, protocols)
moved into ``openprompt_ipt.runner``. A meta-path finder maps each old name onto the module object at
the new path — one object under two names, so monkeypatching either patches both — and warns once.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = ("config", "experiment", "runs", "sweep", "aggregate", "plotting", "plm", "predict", "protocols")
_PREFIX = "openprompt_ipt."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        head = fullname[len(_PREFIX):].split(".")[0] if fullname.startswith(_PREFIX) else None
        if head in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = _PREFIX + "runner." + spec.name[len(_PREFIX):]
        warnings.warn(f"'{spec.name}' moved to '{new}'; the old path goes in openprompt_ipt 0.2",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):  # already executed under its new name
        pass


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
