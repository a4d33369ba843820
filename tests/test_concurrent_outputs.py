"""Two processes started at once on one output (issue #43's rule beyond run directories): a finished result is
never replaced without --overwrite, and no file ever holds a mix of two writers' bytes. Each test lines two real
processes up with a barrier between the output check and the write, where the race is."""
import json
import multiprocessing as mp
import os
import sys
import traceback

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ctx = mp.get_context("fork")  # the children inherit this test's monkeypatches


def _child(target, args, results):
    try:
        results.put(("ok", target(*args)))
    except BaseException as e:  # noqa: BLE001  (reported to the parent, which asserts)
        results.put(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_two(target, args_a, args_b, timeout=60):
    """Run ``target(*args)`` in two processes at once; their (kind, value) results in either order."""
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(target, args, results)) for args in (args_a, args_b)]
    for p in procs:
        p.start()
    out = [results.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout)
    return out


# ---------------------------------------------------------------- predict --output
class FakePredictor:
    """What ``load_run`` returns, in a second: predicts after both processes passed the output check."""

    def __init__(self, barrier, label):
        self.barrier, self.label = barrier, label

    def predict(self, rows, on_bad_row=None):
        self.barrier.wait(30)
        return [{"label": self.label, "pad": "x" * (5000 if self.label == "long" else 1)} for _ in rows]

    def precision_note(self):
        return None

    def extra_note(self):
        return None


def _predict(output, label, barrier, overwrite=False):
    import openprompt_ipt.runner.predict as rp
    import openprompt_ipt.runner.run_dirs as rd
    from openprompt_ipt.commands.predict import main

    rd.find_run = lambda path, *args, **kwargs: path
    rp.load_run = lambda run_dir, device=None, **kwargs: FakePredictor(barrier, label)
    return main(["--run", os.path.dirname(output), "--input", os.path.join(os.path.dirname(output), "rows.jsonl"),
                 "--output", output] + (["--overwrite"] if overwrite else []))


def test_two_predicts_on_one_output_keep_one_whole_result(tmp_path):
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"text_a": f"t{i}"}) + "\n" for i in range(20)))
    output, barrier = str(tmp_path / "preds.jsonl"), ctx.Barrier(2)
    codes = run_two(_predict, (output, "long", barrier), (output, "short", barrier))
    assert sorted(codes) == [("ok", 0), ("ok", 2)], codes  # one wrote, the other was refused (exit 2)
    rows = [json.loads(line) for line in open(output)]  # whole JSON lines of one writer only
    assert len(rows) == 20 and len({r["label"] for r in rows}) == 1
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def _write_at_once(path, data, barrier, replace):
    import openprompt_ipt.serialization as ser

    real = os.replace if replace else getattr(ser, "place_new", None)

    def slow(src, dst):  # both writers have written their bytes: now both rename
        barrier.wait(30)
        return real(src, dst)

    if replace:
        os.replace = slow
    else:
        ser.place_new = slow
    ser.write_bytes_atomic(path, data, **({} if replace else {"replace": False}))
    return len(data)


@pytest.mark.parametrize("replace", [True, False])
def test_two_atomic_writes_at_once_never_mix_or_crash(tmp_path, replace):
    """Each writer has its own temp file: with ``replace`` both succeed and the file is one of them whole (the
    shared '<file>.tmp' of before mixed their bytes or lost the second rename); without it, one is refused."""
    path, barrier = str(tmp_path / "table.md"), ctx.Barrier(2)
    long, short = b"L" * 100_000, b"s" * 10
    results = run_two(_write_at_once, (path, long, barrier, replace), (path, short, barrier, replace))
    kinds = sorted(kind for kind, _ in results)
    assert kinds == (["ok", "ok"] if replace else ["error", "ok"]), results
    if not replace:
        assert "FileExistsError" in [v for k, v in results if k == "error"][0]
    assert open(path, "rb").read() in (long, short)
    assert os.listdir(tmp_path) == ["table.md"]  # no temp file left
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- aggregate --out
def _aggregate(runs, out, role, events):
    import openprompt_ipt.serialization as ser
    from openprompt_ipt.runner.aggregate import aggregate

    a_began, b_wrote = events
    real = ser.write_text_atomic

    def write(path, text, *rest):
        real(path, text, *rest)
        if role == "a" and not a_began.is_set():
            a_began.set()
            b_wrote.wait(3)  # without a lock b writes its set now; with one, b waits for a's set to end
        else:
            b_wrote.set()

    ser.write_text_atomic = write
    if role == "b":
        a_began.wait(10)  # a is between its files now
    return sorted(aggregate([runs], out))


def test_two_aggregates_into_one_out_leave_one_whole_set(tmp_path):
    for task, acc in (("rte", 0.55), ("boolq", 0.7)):
        seed = tmp_path / f"runs_{task}" / f"{task}_x" / "seed1"
        seed.mkdir(parents=True)
        (seed / "metrics.json").write_text(json.dumps({
            "dataset": task, "strategy": "prefix/kv", "metrics": ["accuracy"], "selection_metric": "accuracy",
            "test_split": "official val", "level": "seed", "seed": 1, "config_name": f"{task}_x",
            "best_dev": {"accuracy": acc}, "test": {"accuracy": acc}}))
    out, events = str(tmp_path / "tables"), (ctx.Event(), ctx.Event())
    results = run_two(_aggregate, (str(tmp_path / "runs_rte" / "*"), out, "a", events),
                      (str(tmp_path / "runs_boolq" / "*"), out, "b", events))
    assert [k for k, _ in results] == ["ok", "ok"], results
    md, table = open(os.path.join(out, "results.md")).read(), open(os.path.join(out, "results.csv")).read()
    task = "rte" if "RTE" in md else "boolq"
    assert f",{task}," in table and ("BOOLQ" if task == "rte" else "RTE") not in md, (md, table)  # one run set's
    assert not os.path.exists(os.path.join(tmp_path, ".tables.lock"))
