"""Learning curves (experiments/plot_curves.py): read from the real trainer's log.csv, a table and a PNG,
and bad input refused with nothing written."""
import importlib.util
import os

from test_checkpoints import _bert_factory, tiny_run

from openprompt_ipt.analysis.curves import curves_table, epoch_curve
from openprompt_ipt.training.logs import read_log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location("plot_curves", os.path.join(ROOT, "experiments", "plot_curves.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_curves_follow_the_trainers_log_and_plot(tmp_path):
    factory = _bert_factory(str(tmp_path / "tiny"))
    tiny_run(factory, tmp_path / "a", epochs=3)
    tiny_run(factory, tmp_path / "b", epochs=2)
    curve = epoch_curve(str(tmp_path / "a"))
    logged = {r["epoch"]: r["value"] for r in read_log(str(tmp_path / "a" / "log.csv")) if r["name"] == "train/epoch_loss"}
    assert sorted(curve) == [1, 2, 3] and {e: p["train_loss"] for e, p in curve.items()} == logged
    assert all("dev_loss" in p and "dev_accuracy" in p for p in curve.values())

    out = tmp_path / "docs" / "curves"
    rc = _script().main([str(tmp_path / "a"), str(tmp_path / "b"), "--labels", "three", "two", "--out", str(out)])
    assert rc == 0
    md = (out.parent / "curves.md").read_text()
    rows = [line.split(" | ") for line in md.splitlines()[2:]]
    assert md.splitlines()[0].startswith("| run | epoch | 1 | 2 | 3 |") and len(rows) == 6
    assert rows[0][0] == "| three" and rows[0][1] == "train loss"
    assert float(rows[0][2]) == round(curve[1]["train_loss"], 3)
    assert rows[5][1] == "dev accuracy" and rows[5][-1] == "- |"  # the 2-epoch run has no epoch 3
    assert (out.parent / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_curves_refuse_bad_input_and_write_nothing(tmp_path, capsys):
    script = _script()
    out = tmp_path / "o"
    assert script.main([str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "no log.csv" in capsys.readouterr().err
    started = tmp_path / "started"
    started.mkdir()
    (started / "log.csv").write_text("step,epoch,name,value\n1,1,train/loss,0.7\n")  # first epoch not over
    assert script.main([str(started), "--out", str(out)]) == 2
    assert "no finished epoch" in capsys.readouterr().err
    assert script.main([str(started), str(started), "--labels", "x", "--out", str(out)]) == 2
    assert "give one label per run" in capsys.readouterr().err
    assert not any(tmp_path.glob("o.*"))
    try:
        curves_table({"x": {1: {"train_loss": 0.5, "dev_loss": 0.6}}})
        raise AssertionError("curves without a dev score accepted")
    except ValueError as e:
        assert "no dev metric" in str(e)


def test_curves_of_a_sweeps_seed_directory_are_its_selected_points(tmp_path, capsys):
    """`plot_curves.py runs/sw/seed1` (a sweep: the seed directory holds the result, each point its own log.csv)
    said `no log.csv in runs/sw/seed1: pass a run directory of one seed`, which it was."""
    import json

    from openprompt_ipt.runner.sweep import point_name

    seed = tmp_path / "sw" / "seed1"
    for lr, loss in ((0.1, 0.9), (0.01, 0.4)):
        point = seed / point_name({"train.lr_prompt": lr})
        point.mkdir(parents=True)
        (point / "log.csv").write_text(f"step,epoch,name,value\n2,1,train/epoch_loss,{loss}\n2,1,dev/accuracy,0.5\n")
    (seed / "metrics.json").write_text(json.dumps({"method": "Prompt Tuning", "seed": 1, "test": {"accuracy": 0.5},
                                                   "selected_point": {"train.lr_prompt": 0.01}}))
    assert _script().main([str(seed), "--out", str(tmp_path / "c")]) == 0
    md = (tmp_path / "c.md").read_text()
    assert "| Prompt Tuning, seed 1 | train loss | 0.400 |" in md


def test_the_dev_score_of_a_regression_run_is_its_selection_metric_not_the_mse(tmp_path):
    """STS-B runs log dev/mse beside pearson / spearman: the third row showed `dev mse` ×100 (the dev loss
    again, as a percent) instead of the score the run selected by."""
    import json

    from openprompt_ipt.analysis.curves import dev_metric

    log = ("step,epoch,name,value\n3,1,train/epoch_loss,0.5\n3,1,dev/pearson,0.4\n3,1,dev/spearman,0.2\n"
           "3,1,dev/pearson_spearman,0.3\n3,1,dev/mse,0.25\n3,1,dev/loss,0.25\n")
    for name, metric in (("a", "pearson_spearman"), ("b", "pearson_spearman"), ("c", "pearson")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "log.csv").write_text(log)
        (tmp_path / name / "config.json").write_text(json.dumps({"train": {"metric": metric}}))
    curves = {"x": epoch_curve(str(tmp_path / "a"))}
    assert dev_metric(curves) == "pearson_spearman"
    assert "| x | train loss |" in curves_table(curves) and "| dev pearson_spearman | 30.0 |" in curves_table(curves)
    assert "| dev mse | 0.250 |" in curves_table(curves, "mse")  # an error is shown as logged, not ×100
    assert dev_metric({"x": {1: {"dev_mse": 0.2, "dev_zeta": 0.5}}}) == "zeta"

    script = _script()
    assert script.main([str(tmp_path / "a"), str(tmp_path / "b"), "--labels", "a", "b", "--out", str(tmp_path / "o")]) == 0
    assert "| dev pearson_spearman | 30.0 |" in (tmp_path / "o.md").read_text()
    assert script.main([str(tmp_path / "c"), "--labels", "c", "--out", str(tmp_path / "p")]) == 0
    assert "| dev pearson | 40.0 |" in (tmp_path / "p.md").read_text()  # the run's own train.metric
    assert "mse" not in (tmp_path / "o.md").read_text() + (tmp_path / "p.md").read_text()


def test_an_out_stem_that_is_a_folder_or_under_a_file_is_one_line_before_any_work(tmp_path, capsys):
    """`--out docs/curves/` wrote the hidden files docs/curves/.md and .png; `--out notes.txt/x` (a file among
    the folders) was a FileExistsError traceback after the work. Both scripts now refuse first, in one line."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sts_cosine", os.path.join(ROOT, "experiments", "sts_cosine.py"))
    sts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sts)
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "log.csv").write_text("step,epoch,name,value\n2,1,train/epoch_loss,0.5\n2,1,dev/accuracy,0.5\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    folder = tmp_path / "figs"
    folder.mkdir()
    for out, message in ((str(folder) + os.sep, "is a folder: give an output stem"), (str(folder), "is a folder"),
                         (str(tmp_path / "notes.txt" / "x"), "is a file, not a folder")):
        assert _script().main([str(tmp_path / "log"), "--out", out]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: --out") and message in err[0], err
        # sts_cosine refuses before it loads the run (here: none there)
        assert sts.main(["--run", str(tmp_path / "no-run"), "--out", out]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert sts.main(["--run", str(tmp_path / "no-run"), "--max-pairs", "-3", "--out", str(folder / "s")]) == 2
    assert "--max-pairs -3 must be at least 1" in capsys.readouterr().err
    assert os.listdir(folder) == [] and (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_figure_already_there_is_kept_unless_overwrite(tmp_path, capsys):
    """`--out docs/curves/x` where x.md / x.png already held another run's figure replaced both without a word;
    plot_curves and sts_cosine now refuse in one line naming the file and --overwrite (sts_cosine before it
    loads the run), and --overwrite replaces them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sts_cosine", os.path.join(ROOT, "experiments", "sts_cosine.py"))
    sts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sts)
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "log.csv").write_text("step,epoch,name,value\n2,1,train/epoch_loss,0.5\n2,1,dev/accuracy,0.5\n")
    for ext in ("md", "png"):
        stem = tmp_path / f"only_{ext}"
        (tmp_path / f"only_{ext}.{ext}").write_text("another run's\n")
        for main, argv in ((_script().main, [str(tmp_path / "log")]), (sts.main, ["--run", str(tmp_path / "no-run")])):
            assert main(argv + ["--out", str(stem)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err == [f"error: --out: '{stem}.{ext}' already exists: --overwrite replaces it, or give another --out"]
        assert (tmp_path / f"only_{ext}.{ext}").read_text() == "another run's\n"
        assert len(list(tmp_path.glob(f"*only_{ext}*"))) == 1  # nothing written beside it, no temp file left
    assert _script().main([str(tmp_path / "log"), "--out", str(tmp_path / "only_md"), "--overwrite"]) == 0
    assert "| dev accuracy | 50.0 |" in (tmp_path / "only_md.md").read_text()
    assert (tmp_path / "only_md.png").read_bytes()[:4] == b"\x89PNG"
