"""A process killed (SIGKILL, power loss: no ``finally``, no ``except``) in the middle of writing: the user's previous
finished files stay intact, and nothing half-written is later taken as finished. Each kill is real: a child process
whose writer calls ``os._exit`` at the chosen instant."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run_child(code: str, **fmt) -> int:
    """Run ``code`` (``{root}`` and ``fmt`` filled in) in a fresh interpreter; its exit code."""
    child = subprocess.run([sys.executable, "-c", code.format(root=ROOT, **fmt)], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode in (0, 9), child.stderr[-2000:]
    return child.returncode


# an export finished once (OLD), then an --overwrite run killed inside finalize, between its two renames
# (the old export moved to <out>.old, the new finished one not yet moved from <out>.partial)
EXPORT_KILLED_IN_FINALIZE = """
import os, sys
sys.path.insert(0, {root!r})
from openprompt_ipt.pretraining import export as ex
out = {out!r}
work = ex.prepare_output(out, {{"a": 1}}, log=lambda *_: None)
open(os.path.join(work, "embedding.safetensors"), "w").write("OLD")
ex.finalize(work, out)
work = ex.prepare_output(out, {{"a": 1}}, overwrite=True, log=lambda *_: None)
open(os.path.join(work, "embedding.safetensors"), "w").write("NEW")
real, calls = os.replace, [0]
def replace(a, b):
    calls[0] += 1
    if calls[0] == 2:  # 1: <out> -> <out>.old; 2: <out>.partial -> <out>
        os._exit(9)
    real(a, b)
os.replace = replace
ex.finalize(work, out)
"""


def test_an_export_killed_between_finalize_renames_is_completed_not_discarded(tmp_path):
    """It was: <out> gone (every encoder_path / pretrained_path naming it failed), the finished new export left in
    <out>.partial, which the next --overwrite deleted and --resume trained again (its DONE marker inside)."""
    from openprompt_ipt.pretraining import export as ex
    from openprompt_ipt.training.run_dir import release

    for flag in ("overwrite", "resume"):
        out = str(tmp_path / flag / "exp")
        assert run_child(EXPORT_KILLED_IN_FINALIZE, out=out) == 9
        assert not os.path.exists(out) and os.path.isdir(out + ".old")  # the state the kill left
        logs = []
        try:
            work = ex.prepare_output(out, {"a": 1}, log=logs.append, **{flag: True})
        except ValueError as e:  # --resume: the run it would continue had finished
            assert flag == "resume" and "already holds a finished run" in str(e)
        else:
            assert flag == "overwrite"  # a new run begins; the export it replaces only when done is the new one
            assert sorted(os.listdir(work)) == ["REPLACES_EXPORT", "run_config.json"]
            release(out)
        assert open(os.path.join(out, "embedding.safetensors")).read() == "NEW"  # the finished new export, in place
        assert ex.is_finished(out) and not os.path.exists(out + ".old")
        assert any("had finished" in str(line) for line in logs)


# a run's log.csv (steps 1-4), then a --resume from step 2 killed while the logger rewrites the kept rows
LOG_KILLED_ON_RESUME = """
import csv, os, sys
sys.path.insert(0, {root!r})
from openprompt_ipt.training.logs import RunLogger
log = RunLogger({run!r}, tensorboard=False)
for step in range(1, 5):
    log.log(step, 1, {{"train/loss": 1.0 / step}})
log.close()
csv.DictWriter.writerows = lambda self, rows: os._exit(9)
RunLogger({run!r}, resume_step=2, tensorboard=False)
"""


def test_a_resume_killed_while_the_log_is_rewritten_keeps_the_log(tmp_path):
    """The logger truncated log.csv, then wrote back the rows it keeps: a kill in between left an empty log, and
    the next --resume kept nothing of the steps before it (the training curves lost)."""
    from openprompt_ipt.training.logs import RunLogger, read_log

    run = str(tmp_path / "run")
    assert run_child(LOG_KILLED_ON_RESUME, run=run) == 9
    assert [r["step"] for r in read_log(os.path.join(run, "log.csv"))] == [1, 2, 3, 4]  # as before the kill
    log = RunLogger(run, resume_step=2, tensorboard=False)
    log.log(3, 1, {"train/loss": 0.5})
    log.close()
    assert [(r["step"], r["value"]) for r in read_log(os.path.join(run, "log.csv"))] == [(1, 1.0), (2, 0.5), (3, 0.5)]


def test_a_log_line_cut_by_a_kill_is_dropped_on_resume_not_kept_broken(tmp_path):
    """A last line cut short ('3,1,train/lo') was kept by --resume as '3,1,train/lo,' and read_log (curves) then
    failed on it; the resumed rows were written after it."""
    from openprompt_ipt.training.logs import RunLogger, read_log

    run = tmp_path / "run"
    run.mkdir()
    (run / "log.csv").write_text("step,epoch,name,value\r\n1,1,train/loss,0.9\r\n2,1,train/loss,0.8\r\n3,1,train/lo")
    assert [r["step"] for r in read_log(str(run / "log.csv"))] == [1, 2]
    log = RunLogger(str(run), resume_step=5, tensorboard=False)
    log.log(3, 1, {"train/loss": 0.7})
    log.close()
    assert [(r["step"], r["value"]) for r in read_log(str(run / "log.csv"))] == [(1, 0.9), (2, 0.8), (3, 0.7)]
    (run / "log.csv").write_text("step,epoch,name,value\r\n1,1,train/loss,oops\r\n2,1,train/loss,0.8\r\n")
    with pytest.raises(ValueError, match=r"log.csv' line 2 is not step,epoch,name,value: .*delete the line"):
        read_log(str(run / "log.csv"))  # a bad line elsewhere is no kill's cut: said, not skipped


def test_a_resume_after_a_kill_between_a_new_best_and_its_checkpoint_keeps_best_safetensors_the_reported_model(
        tiny_dir, tmp_path, monkeypatch):
    """Epoch 2 improved on dev and wrote best.safetensors; SIGTERM (Ctrl-C's path) landed in the epoch's checkpoint
    write, so --resume continued from epoch 1's checkpoint, whose best is epoch 1. Where the resumed epoch 2 does
    not reach that dev score again (a GPU run is not bit-identical), the run reported epoch 1 (metrics, the model it
    tested) while best.safetensors, what predict and init_from load, still held the lost epoch 2."""
    from safetensors.torch import load_file

    from test_checkpoints import _bert_factory, tiny_run
    from openprompt_ipt.training import trainer as trainer_mod
    from openprompt_ipt.training.checkpoint import latest_checkpoint

    scores = iter([0.5, 0.9,  # the killed run: epoch 2 is its best
                   0.4, 0.45])  # the resumed run's epochs 2 and 3: neither beats epoch 1
    monkeypatch.setattr(trainer_mod, "evaluate", lambda *a, **k: {"loss": 0.7, **dict.fromkeys(("accuracy", "macro_f1"), next(scores))})
    real_save, saves = trainer_mod.save_checkpoint, [0]

    def save(*a, **k):
        saves[0] += 1
        if saves[0] == 2:  # epoch 2's checkpoint, after its best.safetensors
            raise KeyboardInterrupt
        return real_save(*a, **k)

    monkeypatch.setattr(trainer_mod, "save_checkpoint", save)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        tiny_run(_bert_factory(tiny_dir), out, checkpoint_every=0)
    epoch2 = load_file(str(out / "best.safetensors"))
    resumed, best = tiny_run(_bert_factory(tiny_dir), out, checkpoint_every=0, resume=latest_checkpoint(str(out)))
    assert best["accuracy"] == 0.5 and [r["epoch"] for r in resumed.config.history] == [1, 2, 3]
    on_disk, reported = load_file(str(out / "best.safetensors")), resumed.trainable_state()
    assert on_disk.keys() == reported.keys() and all(torch.equal(on_disk[k], reported[k]) for k in on_disk)
    assert not all(torch.equal(epoch2[k], reported[k]) for k in epoch2)


def test_run_tables_killed_while_saving_its_results_keeps_the_rows_done(tmp_path, monkeypatch):
    """experiments/run_tables.py rewrote RESULTS.json in place after every YAML and reads it back to skip the rows
    done: Ctrl-C during the write left a cut JSON file, and the next run failed on it, every row lost with it."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("run_tables_k", os.path.join(ROOT, "experiments", "run_tables.py"))
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    monkeypatch.chdir(tmp_path)  # main() changes into the repository: put it back after
    monkeypatch.setattr(sys, "path", list(sys.path))
    results = str(tmp_path / "smoke")
    monkeypatch.setattr(rt, "RESULTS", results)
    monkeypatch.setattr(rt, "run_one", lambda argv, log, timeout, spawn: 0)
    monkeypatch.setattr(rt, "test_metric", lambda run_dir: {"metric": "accuracy", "value": 0.5})
    argv = ["--tables", "ipt_table2", "--output-dir", str(tmp_path / "runs"), "--spawn"]
    yamls = sorted(os.path.relpath(p, ROOT) for p in __import__("glob").glob(os.path.join(ROOT, "yamls", "ipt_table2",
                                                                                         "*.yaml")))
    import builtins

    real_open, opened = builtins.open, [0]

    class Cut:
        """A file whose first write stops half-way with Ctrl-C."""
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:len(data) // 2])
            self.f.flush()
            raise KeyboardInterrupt

    real_fdopen = os.fdopen
    json_name = os.path.basename(results) + ".json"

    def written(file, mode):
        name = os.path.basename(str(file))  # the file itself, or an atomic write's own temp file beside it
        return "w" in mode and (name == json_name or name.startswith(f".{json_name}."))

    def cut_third_json_write(file, mode="r", *a, **k):  # the 3rd time RESULTS.json is written
        f = real_open(file, mode, *a, **k)
        if written(file, mode):
            opened[0] += 1
            if opened[0] == 3:
                return Cut(f)
        return f

    def cut_third_json_fdopen(fd, mode="r", *a, **k):  # the same, for a temp file opened by its descriptor
        f = real_fdopen(fd, mode, *a, **k)
        if written(os.readlink(f"/proc/self/fd/{fd}"), mode):
            opened[0] += 1
            if opened[0] == 3:
                return Cut(f)
        return f

    monkeypatch.setattr(builtins, "open", cut_third_json_write)
    monkeypatch.setattr(os, "fdopen", cut_third_json_fdopen)
    with pytest.raises(KeyboardInterrupt):
        rt.main(argv)
    monkeypatch.setattr(builtins, "open", real_open)
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert sorted(json.load(open(results + ".json"))) == yamls[:2]  # the rows of the two YAMLs done
    assert rt.main(argv + ["--only", os.path.basename(yamls[2])[:-5]]) == 0
    assert sorted(json.load(open(results + ".json"))) == yamls[:3]


def test_what_is_renamed_into_place_is_on_the_disk_first(tmp_path, monkeypatch):
    """A power loss cannot be staged in a test: what protects against it can. A rename reaches the disk's journal
    within seconds, the data of a file just written up to half a minute later; a checkpoint, best.safetensors or a
    result renamed into place unsynced could come back empty after a power loss, the previous one already replaced
    (and older checkpoints removed). Each must be fsynced before its rename, and the checkpoint folder's rename and
    the ``latest`` pointer before older checkpoints go."""
    from openprompt_ipt.serialization import write_text_atomic
    from openprompt_ipt.training import checkpoint as ck

    events = []
    real_fsync, real_replace, real_rmtree = os.fsync, os.replace, ck.shutil.rmtree
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b))[1])
    monkeypatch.setattr(ck.shutil, "rmtree", lambda p, **k: (events.append(("rmtree", str(p))), real_rmtree(p, **k))[1])

    def synced_before_renamed(path, renamed_as, synced=None):
        at = events.index(("replace", path, renamed_as))
        return ("fsync", synced or path) in events[:at]

    write_text_atomic(str(tmp_path / "metrics.json"), "{}")
    temp = next(e[1] for e in events if e[0] == "replace" and e[2] == str(tmp_path / "metrics.json"))
    assert synced_before_renamed(temp, str(tmp_path / "metrics.json"))

    run, root = str(tmp_path / "run"), str(tmp_path / "run" / "checkpoints")
    for step in (1, 2):
        events.clear()
        ck.save_checkpoint(run, {"w": torch.ones(2) * step}, {"w": torch.zeros(2)}, {"progress": {"global_step": step}},
                           {"a": 1})
    tmp, final = os.path.join(root, ".tmp-step-0000002"), os.path.join(root, "step-0000002")
    for name in os.listdir(final):
        assert synced_before_renamed(tmp, final, synced=os.path.join(tmp, name)), name
    assert synced_before_renamed(tmp, final)
    assert synced_before_renamed(os.path.join(root, "latest.tmp"), os.path.join(root, "latest"))
    pointer = events.index(("replace", os.path.join(root, "latest.tmp"), os.path.join(root, "latest")))
    pruned = events.index(("rmtree", os.path.join(root, "step-0000001")))
    assert ("fsync", root) in events[pointer:pruned]  # the pointer's rename is on the disk before step 1 goes
    assert ("fsync", root) in events[events.index(("replace", tmp, final)):pointer]

    from openprompt_ipt.training import Trainer  # best.safetensors, written at every new best on dev
    trainer = Trainer.__new__(Trainer)
    trainer.output_dir, trainer.best_state = run, {"w": torch.ones(2)}
    events.clear()
    trainer._save_best()
    best = os.path.join(run, "best.safetensors")
    assert synced_before_renamed(best + ".tmp", best)


# a finished tiny run (its epoch checkpoint kept), then a fresh run in the same folder (the Trainer API, PPT's last
# step) killed while it removes the old checkpoints: one file of the checkpoint gone, the rest not yet
CHECKPOINTS_REMOVAL_KILLED = """
import glob, os, shutil, sys
sys.path[:0] = [{root!r}, os.path.join({root!r}, "tests")]
import openprompt_ipt  # noqa: F401  (its OpenPrompt shims first, as conftest.py does)
from test_checkpoints import _bert_factory, tiny_run
make = _bert_factory({tiny!r})
tiny_run(make, {out!r}, epochs=1, checkpoint_every=0)
def half_removed(path, **kwargs):
    for f in glob.glob(os.path.join(path, "step-*", "trainable.safetensors")):
        os.remove(f)
    os._exit(9)
shutil.rmtree = half_removed
tiny_run(make, {out!r}, epochs=1, checkpoint_every=0)
"""


def test_a_kill_while_old_checkpoints_are_removed_leaves_no_pointer_to_a_half_removed_one(tiny_dir, tmp_path):
    """``latest`` still named the half-removed checkpoint: --resume took it and failed on the missing file, again
    at every try (a raw 'No such file or directory'), a finished PPT run's prompt with it."""
    from openprompt_ipt.training.checkpoint import latest_checkpoint, load_checkpoint

    out = str(tmp_path / "run")
    assert run_child(CHECKPOINTS_REMOVAL_KILLED, tiny=tiny_dir, out=out) == 9
    ckpt = latest_checkpoint(out)
    assert ckpt is None or load_checkpoint(ckpt)["trainable"]


def test_a_checkpoint_missing_a_file_is_one_line_naming_it(tmp_path):
    """A checkpoint folder copied or removed only in part was a bare 'No such file or directory'."""
    from openprompt_ipt.serialization import DamagedFile
    from openprompt_ipt.training.checkpoint import load_checkpoint, save_checkpoint

    path = save_checkpoint(str(tmp_path), {"w": torch.ones(2)}, None, {"progress": {"global_step": 1}}, {})
    os.remove(os.path.join(path, "trainable.safetensors"))
    with pytest.raises(DamagedFile, match=r"checkpoint '.*step-0000001' lacks trainable.safetensors \(removed or "
                                          r"copied only in part\): delete the checkpoint folder"):
        load_checkpoint(path)


def test_a_template_save_cut_between_its_two_renames_is_one_line_at_load(bert, tmp_path, monkeypatch):
    """save_pretrained renames the weights, then the config: a kill between the two, re-saving into a folder,
    left the new weights beside the old config, and from_pretrained built the old config's template and loaded
    the new weights into it without a word (the same shapes: another prompt). The weights now carry their
    config's hash: a config that is not theirs is a warning (a hand edit looks the same, so it still loads)."""
    from helpers import TEXT

    from openprompt_ipt import InstanceWiseTemplate

    model, tok = bert
    folder = str(tmp_path / "t")
    InstanceWiseTemplate(model, tok, text=TEXT, prompt_length=2).save_pretrained(folder)
    InstanceWiseTemplate.from_pretrained(folder, model, tok)  # one whole save loads
    real_replace = os.replace

    def killed_after_the_weights(a, b):
        real_replace(a, b)
        if b.endswith(".safetensors"):
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed_after_the_weights)
    with pytest.raises(KeyboardInterrupt):
        InstanceWiseTemplate(model, tok, text=TEXT.replace("question:", "asked:"), prompt_length=2).save_pretrained(folder)
    monkeypatch.setattr(os, "replace", real_replace)
    from openprompt_ipt.serialization import ConfigChangedWarning

    with pytest.warns(ConfigChangedWarning, match="is not the config saved with template.safetensors"):
        InstanceWiseTemplate.from_pretrained(folder, model, tok)


# a figure script's table and PNG replaced (--overwrite) by a process killed while it writes the second file
PAIR_KILLED = """
import os, sys
sys.path.insert(0, {root!r})
from openprompt_ipt.runner.plotting import write_table_and_plot
real, calls = os.fsync, [0]
def fsync(fd):
    calls[0] += 1
    if calls[0] == 2:  # the second file's bytes, before they are on the disk
        os._exit(9)
    real(fd)
os.fsync = fsync
write_table_and_plot({stem!r}, "NEW table", b"NEW png", overwrite=True)
"""


def test_a_table_and_its_figure_killed_between_them_stay_the_previous_pair(tmp_path):
    """plot_curves / sts_cosine / plot_prompt_length and accuracy.py's summaries wrote the table, then the PNG: a
    kill between them left the new table beside the old figure, both looking finished."""
    stem = str(tmp_path / "fig")
    (tmp_path / "fig.md").write_text("OLD table")
    (tmp_path / "fig.png").write_bytes(b"OLD png")
    assert run_child(PAIR_KILLED, stem=stem) == 9
    assert (tmp_path / "fig.md").read_text() == "OLD table" and (tmp_path / "fig.png").read_bytes() == b"OLD png"


def test_a_set_that_cannot_land_whole_without_replacing_lands_not_at_all(tmp_path):
    """write_files_atomic(replace=False): a file of the set that exists by now is FileExistsError naming it (not
    the temp file os.link names), and the files of the set already placed are taken back, temps removed."""
    from openprompt_ipt.serialization import write_files_atomic

    (tmp_path / "b.md").write_text("theirs")
    with pytest.raises(FileExistsError) as e:
        write_files_atomic({str(tmp_path / "a.png"): b"png", str(tmp_path / "b.md"): "mine"}, replace=False)
    assert e.value.filename == str(tmp_path / "b.md")
    assert os.listdir(tmp_path) == ["b.md"] and (tmp_path / "b.md").read_text() == "theirs"
    write_files_atomic({str(tmp_path / "a.png"): b"png", str(tmp_path / "b.md"): "mine"})
    assert (tmp_path / "a.png").read_bytes() == b"png" and (tmp_path / "b.md").read_text() == "mine"
