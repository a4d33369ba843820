"""A data file is read once per process for every seed of a group (data/row_cache.py), never served stale."""
import json
import os

from openprompt_ipt.data import row_cache
from openprompt_ipt.data.custom import ColumnFile
from openprompt_ipt.data.lookup import get_task
from openprompt_ipt.data.prepare import prepare_splits
from openprompt_ipt.data.tasks import LocalFile
from openprompt_ipt.runner.config import DEFAULTS

LABELS = ("entailment", "contradiction", "neutral")


def _write_cb(folder, word="cat", n=30):
    os.makedirs(folder, exist_ok=True)
    for split in ("train", "val"):
        with open(os.path.join(folder, f"{split}.jsonl"), "w") as f:
            for i in range(n):
                f.write(json.dumps({"premise": f"the {word} {i} sat", "hypothesis": f"a {word} sat",
                                    "label": LABELS[i % 3], "idx": i}) + "\n")


def _counting(monkeypatch, cls):
    calls = []
    real = cls.read

    def read(self, folder, *args):
        calls.append(os.path.join(folder, self.name))
        return real(self, folder, *args)
    monkeypatch.setattr(cls, "read", read)
    return calls


def _rows(examples):
    return [(e.guid, e.text_a, e.text_b, e.label, e.meta) for e in examples]


def _cfg(path, seed, **dataset):
    cfg = json.loads(json.dumps(DEFAULTS))
    cfg["dataset"].update(name="cb", path=path, dev_from_train=0.2, **dataset)
    cfg["seed"] = seed
    return cfg


def test_every_seed_of_a_group_reads_the_files_once_with_the_same_splits(tmp_path, monkeypatch):
    """IMDB --seeds 1,2,3 read its three files three times (~1.4 s a seed); the splits are today's, seed by seed."""
    folder = str(tmp_path / "CB")
    _write_cb(folder)
    calls = _counting(monkeypatch, LocalFile)
    got = {seed: prepare_splits(_cfg(folder, seed, max_train=12), str(tmp_path)) for seed in (1, 2, 3)}
    assert sorted(calls) == sorted({os.path.join(folder, "train.jsonl"), os.path.join(folder, "val.jsonl")})
    row_cache.clear()  # each seed read from scratch, as each seed did before
    for seed, splits in got.items():
        fresh = prepare_splits(_cfg(folder, seed, max_train=12), str(tmp_path))
        assert [_rows(s) for s in splits.as_tuple()[:3]] == [_rows(s) for s in fresh.as_tuple()[:3]]
    assert _rows(got[1].train) != _rows(got[2].train)  # the seeds still draw their own rows


def test_a_file_changed_since_is_read_again_even_with_its_size_and_mtime(tmp_path, monkeypatch):
    folder = str(tmp_path / "CB")
    _write_cb(folder, "cat")
    task = get_task("cb")
    assert task.load(folder, "train")[0].text_a == "the cat 0 sat"
    train = os.path.join(folder, "train.jsonl")
    before = os.stat(train)
    _write_cb(folder, "dog")  # the same length, and the old mtime put back (cp -p, an unpacked archive)
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(train).st_size == before.st_size
    assert task.load(folder, "train")[0].text_a == "the dog 0 sat"


def test_a_custom_files_bad_rows_are_listed_for_every_seed(tmp_path, monkeypatch):
    """A custom task's reader collects its bad rows: the cached read gives them back with its rows."""
    folder = tmp_path / "mine"
    folder.mkdir()
    rows = [{"text": f"row {i}", "label": "a" if i % 2 else "b"} for i in range(10)] + [{"text": None, "label": "a"}]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    task = get_task("text_classification", {"name": "text_classification", "path": str(folder), "labels": ["a", "b"],
                                            "columns": {"text_a": "text", "label": "label"}, "skip_bad_rows": True})
    calls = _counting(monkeypatch, ColumnFile)
    outputs = []
    for _ in range(2):
        import io
        import contextlib

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            outputs.append((_rows(task.load(str(folder), "train")), err.getvalue()))
    assert len(calls) == 1
    assert outputs[0] == outputs[1] and len(outputs[0][0]) == 10 and "line 11" in outputs[0][1]
