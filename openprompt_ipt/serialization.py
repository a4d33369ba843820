"""save/load of only the trained weights (safetensors) beside a JSON config, written atomically;
atomic text writes, the one JSON-lines reader, and reads of saved files that fail in one line when the
file is damaged (a truncated checkpoint, a half-copied ``best.safetensors``)."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from typing import Dict, Iterable, Iterator, Union

import torch
from torch import nn

PAIR_KEY = "config_sha256"  # save_trainable: the hash of the config saved beside the weights


def sorted_metadata(path: str) -> str:
    """Rewrite a safetensors file's header with its ``__metadata__`` keys sorted, in place. safetensors writes
    them in hash-map order, which changes from call to call: the same export would hash differently each time.
    The header keeps its length (the same JSON, reordered, space-padded as safetensors pads it)."""
    import struct

    with open(path, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        if "__metadata__" not in header:
            return path
        header = {"__metadata__": dict(sorted(header.pop("__metadata__").items())), **header}
        raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(raw) <= n:  # else (an escaping that differs from safetensors'): keep the file as it is
            f.seek(8)
            f.write(raw.ljust(n, b" "))
    return path


def usual_mode(path: str) -> str:
    """Give ``path`` the mode every other file of a run has (0666 less the umask, e.g. 0644):
    ``safetensors.save_file`` creates its files 0600."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)
    return path


def trainable_state(module: nn.Module, skip: Iterable[str] = ()) -> dict:
    skip = tuple(skip)
    return {n: p.detach().contiguous().cpu() for n, p in module.named_parameters()
            if p.requires_grad and not n.startswith(skip)}


def save_trainable(module: nn.Module, directory: str, weights_file: str, config_file: str, config: dict,
                   skip: Iterable[str] = ()) -> None:
    from safetensors.torch import save_file

    os.makedirs(directory, exist_ok=True)
    text = json.dumps(config, indent=2)
    # write both into a temp dir first, then rename: no half-written file is ever visible; the weights carry
    # their config's hash, so a save cut between the two renames (new weights, old config) is found at load
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        save_file(trainable_state(module, skip), os.path.join(tmp, weights_file),
                  metadata={PAIR_KEY: hashlib.sha256(text.encode("utf-8")).hexdigest()})
        usual_mode(os.path.join(tmp, weights_file))
        with open(os.path.join(tmp, config_file), "w") as f:
            f.write(text)
        os.replace(os.path.join(tmp, weights_file), os.path.join(directory, weights_file))
        os.replace(os.path.join(tmp, config_file), os.path.join(directory, config_file))


class ConfigChangedWarning(UserWarning):
    """A saved config that is not the one saved with its weights: edited by hand, or a save cut short."""


def file_sha256(path: str) -> str:
    """sha256 of a file's bytes, read in blocks (a local dataset file, a checkpoint's weights)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_saved_pair(directory: str, weights_file: str, config_file: str) -> None:
    """The weights and config of a ``save_trainable`` folder come from one save, or a warning says otherwise: a
    save interrupted between its two renames left new weights beside the old config (a hand edit of the config
    looks the same, so it loads as the config now says). Files saved before the hash was kept pass."""
    import warnings

    from safetensors import safe_open

    weights = os.path.join(directory, weights_file)
    try:
        with safe_open(weights, "pt") as f:
            want = (f.metadata() or {}).get(PAIR_KEY)
    except Exception:  # missing or damaged: the weights' own load says so
        return
    with open(os.path.join(directory, config_file), "rb") as f:
        if want and hashlib.sha256(f.read()).hexdigest() != want:
            warnings.warn(f"'{directory}': {config_file} is not the config saved with {weights_file} (edited since, "
                          "or a save interrupted between the two files): loading it as it reads now; if it was not "
                          "edited, save the prompt again", ConfigChangedWarning, stacklevel=3)


class DamagedFile(ValueError):
    """A saved file that cannot be read back (truncated, half-copied): one line naming it and the fix."""


def _damaged(path: str, error: Exception, fix: str) -> DamagedFile:
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if len(reason) > 120:  # cut at a word, and say so
        reason = reason[:120].rsplit(" ", 1)[0] + " ..."
    return DamagedFile(f"file '{path}' is damaged or truncated ({type(error).__name__}: {reason}): {fix}")


def read_safetensors(path: str, fix: str = "re-create it (rerun what wrote it)") -> dict:
    """``safetensors.torch.load_file``; a damaged file is one ``DamagedFile`` line ending in ``fix``."""
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except FileNotFoundError:
        raise
    except Exception as e:  # safetensors raises its own SafetensorError (and OSError for short reads)
        raise _damaged(path, e, fix) from None


def check_safetensors(path: str, fix: str = "re-create it (rerun what wrote it)") -> None:
    """A missing, empty or cut-short safetensors file is one ``DamagedFile`` line (its header and size are
    read, not its tensors)."""
    from safetensors import safe_open

    if not os.path.isfile(path):
        raise DamagedFile(f"file '{path}' is missing: {fix}")
    try:
        with safe_open(path, "pt") as f:
            for key in list(f.keys())[-1:]:  # the last tensor ends at the file's end: a cut file fails here
                f.get_slice(key)
    except Exception as e:
        raise _damaged(path, e, fix) from None


def read_torch(path: str, fix: str = "re-create it (rerun what wrote it)", **kwargs):
    """``torch.load`` (CPU, full pickles: our own files only); a damaged file is one ``DamagedFile`` line."""
    import torch

    try:
        return torch.load(path, **{"map_location": "cpu", "weights_only": False, **kwargs})
    except FileNotFoundError:
        raise
    except Exception as e:  # truncated zip: RuntimeError; cut pickle: EOFError / UnpicklingError
        raise _damaged(path, e, fix) from None


def read_json(path: str, fix: str = "re-create it (rerun what wrote it)"):
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as e:
        raise _damaged(path, e, fix) from None


def load_trainable(module: nn.Module, path: str, fix: str = "re-create it (rerun what wrote it)",
                   complete: bool = False, skip: Iterable[str] = ()) -> None:
    """``path``'s tensors into ``module``'s parameters of the same names. ``complete``: the file must hold every
    parameter that trains (requires grad; but those under ``skip``, which its writer leaves out), else one line: a
    tensor left out kept its untrained start, and the model predicted from it without a word."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weights file '{path}' not found: {fix}")
    state = read_safetensors(path, fix)
    own = dict(module.named_parameters())
    missing = [k for k, p in own.items() if complete and p.requires_grad and k not in state and not k.startswith(tuple(skip))]
    if missing:
        raise ValueError(f"'{path}' lacks {len(missing)} trained tensor(s) of this model ({listed(missing)}): they "
                         f"would predict from their untrained start (saved from another config or release?); {fix}")
    load_state(module, state, path, fix)


def listed(names, most: int = 3) -> str:
    """The first ``most`` names, then ', ...' when there are more."""
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def load_state(module: nn.Module, state: dict, path: str, fix: str) -> None:
    """``state`` (read from ``path``) into ``module``'s parameters of the same names, each name, shape and value
    checked before the first copy: a refused file leaves the module as it was."""
    own = dict(module.named_parameters())
    unknown = [k for k in state if k not in own]
    if unknown:
        raise ValueError(f"'{path}' has weights this module lacks: {unknown[:5]} (was it saved from another config?)")
    for name, tensor in state.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"'{path}': {name} is {tuple(tensor.shape)} but the module expects {tuple(own[name].shape)}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):  # its argmax is a confident label
            raise ValueError(f"'{path}': {name} holds NaN / inf values (the training that saved it diverged): {fix}")
    for name, tensor in state.items():
        own[name].data.copy_(tensor)


def durable(*paths: str) -> None:
    """``fsync`` each file or folder: its bytes (a folder: its entries, a rename into it) are on the disk, not only in
    the page cache. A rename is journaled within seconds, the renamed file's data up to half a minute later: without
    this, a power loss just after a checkpoint or a result was renamed into place can leave it empty, the previous
    one already replaced or removed."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: str, data: bytes, replace: bool = True) -> None:
    """Write through a temp file of this call's own, ``fsync`` and rename it into place: an interrupted write
    (a kill, a power loss) never leaves half a file under the real name, and two processes writing one file at
    once never mix their bytes (tables, metrics, plots, CLI outputs all go through here). ``replace=False``:
    never replace a file that exists, not even one another process wrote while this one worked (a check
    before the work cannot see that): ``FileExistsError``, this call's bytes dropped."""
    write_files_atomic({path: data}, replace)


def write_files_atomic(files: Dict[str, Union[bytes, str]], replace: bool = True) -> None:
    """``write_bytes_atomic`` for files that belong together (a table and its figure): every file is written
    to its temp first, then all are renamed in the given order, so a kill or an error while one is written
    leaves the previous set whole, never a new table beside an old figure. ``replace=False``: a file that
    exists by now is ``FileExistsError``, and those of this set already placed are taken back."""
    temps, placed = {}, []
    try:
        for path, data in files.items():
            temps[path] = _synced_temp(path, data.encode("utf-8") if isinstance(data, str) else data)
        for path, tmp in temps.items():
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    place_new(tmp, path)
                except FileExistsError:  # os.link names the temp first: name the file that exists
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path) from None
                placed.append(path)
    except FileExistsError:
        for path in placed:  # this set's own new files (hard links of its temps): the set lands whole or not at all
            os.remove(path)
        raise
    finally:
        for tmp in temps.values():
            if os.path.lexists(tmp):
                os.remove(tmp)


def _synced_temp(path: str, data: bytes) -> str:
    """``data`` in a new temp file beside ``path``, on the disk (fsync) and 0644; removed if writing fails."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # on the disk before the rename: a power loss never leaves it empty (durable())
        usual_mode(tmp)  # mkstemp makes it 0600; every other output is 0644
    except BaseException:
        os.remove(tmp)
        raise
    return tmp


def place_new(src: str, path: str) -> None:
    """Give the finished file ``src`` the name ``path`` only if no file has it (a rename that never replaces):
    a hard link, which the kernel refuses when ``path`` exists (``FileExistsError``); ``src`` is left to the
    caller. On a file system without hard links, ``path`` is claimed by an exclusive create first."""
    try:
        os.link(src, path)
        return
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some network / FAT file systems)
        pass
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    os.replace(src, path)


def write_text_atomic(path: str, text: str, replace: bool = True) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), replace)


class OutputExists(ValueError):
    """An --output file another process wrote while this one worked: kept; one line naming it and the fix."""


def emit_text(text: str, output: str | None, summary: str, overwrite: bool = True) -> None:
    """CLI output: to stdout, or to ``output`` atomically with ``summary`` on stderr. Without ``overwrite`` an
    ``output`` that exists by now (another process started at the same moment wrote it) is kept:
    ``OutputExists``."""
    import sys

    if not output:
        sys.stdout.write(text)
        return
    try:
        write_text_atomic(output, text, replace=overwrite)
    except FileExistsError:
        raise OutputExists(f"--output '{output}' was written by another process while this one ran: it is kept; "
                           "--overwrite replaces it, or give another --output file") from None
    print(f"{summary} -> {output}", file=sys.stderr)


def iter_jsonl(lines: Iterable[str], where: str, numbered: bool = False) -> Iterator:
    """The JSON value of each non-blank line (``numbered``: ``(line number, value)``); a bad line is one
    ValueError naming ``where`` and its number."""
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where} line {n} is not JSON ({e.msg}): write one JSON object per line") from None
            yield (n, value) if numbered else value
