"""``python -m openprompt_ipt.openprompt.cli --config_yaml FILE.yaml [--resume DIR | --test DIR] [--section.key value ...]``

OpenPrompt's ``experiments/cli.py`` command line and experiment YAMLs, with our templates, run by
OpenPrompt's own ``ClassificationRunner``. That script needs these changes for our YAMLs, each done here
(docs/openprompt.md, "OpenPrompt's own command line"):

1. it never imports ``openprompt_ipt``, so ``load_template`` does not know ``instance_wise`` /
   ``generated_prefix``: imported first;
2. ``plm.model_path: minilm`` (the offline backbone) is no path ``load_plm`` can read:
   ``openprompt_ipt.load_backbone``, which also refuses a ``plm.model_name`` that does not match the
   checkpoint (``roberta`` on MiniLM splits text into single characters);
3. its trainer moves every batch to ``cuda:<local_rank>`` whatever ``environment.num_gpus`` says: without a
   GPU, ``num_gpus`` becomes 0 and those moves go to the CPU;
4. ``file_path`` of the template / verbalizer is read from the working directory: a relative path that
   exists beside the YAML is read from there;
5. ``dataset.path`` names OpenPrompt's own dataset folders: the data come from our task loader instead
   (``dataset.path``, ``--data-root`` / ``IPT_ASSETS``, as ``experiments/run.py`` finds them), then
   OpenPrompt's few-shot sampler as in its script;
6. ``logging.path_base`` must exist beforehand: it is created;
7. its ``set_seed`` skips ``reproduce.seed: 0`` (``if seed:``): seed 0 seeds like any other.

``dataloader.truncate_method`` (``head`` / ``tail`` / ``balanced``) is used as given: our templates keep
OpenPrompt's ``shortenable_ids`` as their last input flag, as its own templates do, so its head / tail
truncation works on them too.

Our templates' vocab tables are dense by default, so OpenPrompt's AdamW and gradient clipping step them.
``--data-root DIR`` is ours; every other option is OpenPrompt's ``get_config``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import List, Optional

import openprompt_ipt  # noqa: F401  (change 1: registers our templates with OpenPrompt; transformers shims)


def say(note: str) -> None:
    print(f"note (openprompt_ipt.openprompt.cli): {note}")


def seed_everything(seed) -> None:
    """OpenPrompt's ``set_seed`` seeds only a truthy seed (``if seed:``): ``reproduce.seed: 0`` seeded nothing, and
    torch 2.13 seeds its generator afresh in every process, so each run drew another start. Every seed but null."""
    import random

    import numpy as np
    import torch

    if seed is None:  # OpenPrompt's "unset"
        return
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # every device's generator


def bad_seed(seed) -> Optional[str]:
    """The error line for a ``reproduce.seed`` numpy cannot take (a traceback from ``np.random.seed`` after the
    run's folder was made), else None."""
    if seed is None or (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= 2**32 - 1):
        return None
    return f"reproduce.seed = {seed!r} is not allowed: give an integer in [0, 4294967295] (or null: unseeded)"


def split_data_root(argv: List[str]):
    """(``--data-root`` value or None, the rest of argv for OpenPrompt's parser)."""
    rest, root = [], None
    it = iter(argv)
    for arg in it:
        if arg == "--data-root":
            root = next(it, None)
        elif arg.startswith("--data-root="):
            root = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return root, rest


def split_unset_keys(argv: List[str]):
    """(``{key: value}`` of ``--section.key value`` options whose YAML value is null, the rest of argv).
    OpenPrompt's parser gives such a key no type and then raises a bare ``TypeError`` on any value
    (``--train.num_training_steps 3``): these are set after its parser, read as YAML values."""
    from openprompt.config import get_user_config

    if "--config_yaml" not in argv or argv.index("--config_yaml") + 1 >= len(argv):
        return {}, argv
    try:
        config = get_user_config(argv[argv.index("--config_yaml") + 1])
    except Exception:  # OpenPrompt's own parser reports a bad YAML
        return {}, argv
    unset, rest, i = {}, [], 0
    while i < len(argv):
        arg = argv[i]
        key = arg[2:] if arg.startswith("--") and "." in arg else None
        node = config
        for part in (key.split(".") if key else ()):
            node = node.get(part, "missing") if hasattr(node, "get") else "missing"
        if key and node is None and i + 1 < len(argv):
            unset[key] = argv[i + 1]
            i += 2
            continue
        rest.append(arg)
        i += 1
    return unset, rest


def set_unset_keys(config, unset) -> None:
    from ..runner.config import YamlLoader

    import yaml

    for key, text in unset.items():
        *sections, last = key.split(".")
        node = config
        for part in sections:
            node = node[part]
        node[last] = yaml.load(text, Loader=YamlLoader)
        print(f"Update key {key}, value None -> {node[last]!r}")


def print_help() -> None:
    """OpenPrompt's options and ours (its parser knows nothing of --data-root)."""
    print(__doc__.split("\n\n")[0].strip("`"))
    print("\noptions:\n  --config_yaml FILE    the experiment YAML (OpenPrompt's schema)\n"
          "  --resume DIR          continue the run in DIR from its last checkpoint\n"
          "  --test DIR            test the best checkpoint of the run in DIR\n"
          "  --data-root DIR       folder holding superglue/CB etc. (default: $IPT_ASSETS or ../shared/assets)\n"
          "  --SECTION.KEY VALUE   any value of the YAML, e.g. --train.num_epochs 3 --plm.model_path minilm")


def beside_yaml(config, section: str, yaml_dir: str) -> None:
    """Change 4: a relative ``file_path`` read from the YAML's folder when it is there, not in the cwd."""
    node = config.get(section)
    path = getattr(node, "file_path", None) if node is not None else None
    if path and not os.path.isabs(path) and not os.path.exists(path) and os.path.exists(os.path.join(yaml_dir, path)):
        node.file_path = os.path.join(yaml_dir, path)


def fix_device(config) -> None:
    """Change 3: no CUDA here -> num_gpus 0 (the trainer's batch moves are redirected by ``cpu_batches``)."""
    import torch

    if config.environment.num_gpus and not torch.cuda.is_available():
        say(f"environment.num_gpus {config.environment.num_gpus} but no CUDA GPU here: running on the CPU")
        config.environment.num_gpus = 0


@contextlib.contextmanager
def cpu_batches(config):
    """OpenPrompt's trainer calls ``batch.to("cuda:<local_rank>")`` unconditionally; on a CPU run that
    device is the CPU (only while the runner runs)."""
    from openprompt.data_utils import InputFeatures

    if config.environment.num_gpus:
        yield
        return
    real = InputFeatures.to

    def to(self, device="cuda:0"):
        return real(self, "cpu" if str(device).startswith("cuda") else device)

    InputFeatures.to = to
    try:
        yield
    finally:
        InputFeatures.to = real


def load_examples(yaml_path: str, data_root: Optional[str], config):
    """Change 5: (train, dev, test, labels) by our task loader, for the YAML's dataset section (with the
    command line's ``--dataset.path`` / ``--plm.*`` values, so both readers see the same file)."""
    from ..runner.config import load_config
    from ..data.prepare import data_source, load_task
    from ..data.sources import data_root as resolve_root

    overrides = [f"plm.{key}={config.plm[key]}" for key in ("model_path", "model_name") if config.plm.get(key)]
    if config.dataset.get("path"):
        overrides.append(f"dataset.path={config.dataset.path}")
    cfg = load_config(yaml_path, overrides)
    root = resolve_root(data_root)
    source = data_source(cfg, root)
    print(source.describe(cfg["dataset"]["name"]))
    return load_task(cfg, root, source)


def check_room(config, template) -> None:
    """OpenPrompt's ``PromptDataLoader`` pads every example to ``dataloader.max_seq_length``, and a template with k
    numbered prompt positions (``n_prefix``: input-layer prompts, kv prefixes unless ``prefix_positions: keep``)
    puts them before the text: with ``max_seq_length + k`` over the model's
    positions every batch was refused at the first training forward, after the data and the model were set up.
    One line before the loaders (our runner keeps that room itself: ``min(max_seq_length, positions - k)``)."""
    k, limit = int(getattr(template, "n_prefix", 0) or 0), getattr(template, "position_limit", None)
    length = config.dataloader.max_seq_length
    if k and limit is not None and length is not None and int(length) + k > int(limit):
        raise ValueError(f"dataloader.max_seq_length = {length} + the template's {k} prompt positions exceed the model's "
                         f"{limit} positions (OpenPrompt pads every example to max_seq_length): set "
                         f"dataloader.max_seq_length <= {limit - k} (--dataloader.max_seq_length {limit - k})")


def build_runner(config, exp_path, labels, train, dev, test):
    from openprompt import PromptDataLoader, PromptForClassification
    from openprompt.prompts import load_template, load_verbalizer
    from openprompt.trainer import ClassificationRunner

    from ..runner.backbones import load_backbone

    config.logging.path = exp_path
    plm, tokenizer, plm_config, wrapper = load_backbone(config.plm.model_path, config.plm.model_name)  # change 2
    template = load_template(config=config, model=plm, tokenizer=tokenizer, plm_config=plm_config)
    refusal = getattr(template, "data_parallel_refusal", lambda: "")()
    if config.environment.num_gpus > 1 and not config.environment.model_parallel and refusal:
        raise ValueError(refusal)  # its runner's nn.DataParallel: one line now, not at the first batch
    check_room(config, template)  # before the loaders tokenize every split and the runner trains
    verbalizer = load_verbalizer(config=config, model=plm, tokenizer=tokenizer, plm_config=plm_config, classes=labels)
    model = PromptForClassification(plm, template, verbalizer, freeze_plm=config.plm.optimize.freeze_para)

    def loader(dataset, split):
        if not dataset:
            return None
        return PromptDataLoader(dataset=dataset, template=template, tokenizer=tokenizer,
                                tokenizer_wrapper_class=wrapper, batch_size=config[split].batch_size,
                                shuffle=config[split].shuffle_data, predict_eos_token=False, **config.dataloader)

    return ClassificationRunner(model=model, train_dataloader=loader(train, "train"),
                                valid_dataloader=loader(dev, "dev"), test_dataloader=loader(test, "test"),
                                id2label=dict(enumerate(labels)), config=config)


def run_one(config, exp_path, labels, train, dev, test, resume=None, test_dir=None, zero=False):
    os.makedirs(exp_path, exist_ok=True)
    runner = build_runner(config, exp_path, labels, train, dev, test)
    with cpu_batches(config):
        if zero:
            return runner.test()
        if test_dir:
            return runner.test(ckpt="best")
        return runner.run(ckpt="last" if resume else None)


def main(argv: Optional[List[str]] = None) -> int:
    from openprompt.config import get_config

    data_root, rest = split_data_root(list(sys.argv[1:] if argv is None else argv))
    if "-h" in rest or "--help" in rest:
        print_help()
        return 0
    if "--config_yaml" in rest:  # OpenPrompt's get_config would end in a traceback on a missing file
        given = rest[rest.index("--config_yaml") + 1] if rest.index("--config_yaml") + 1 < len(rest) else None
        if given is None or not os.path.isfile(given):
            print(f"error: --config_yaml {given or '(no file given)'}: no such file; give the path of an experiment "
                  "YAML in OpenPrompt's schema (e.g. yamls/openprompt/cb_instance_wise.yaml)", file=sys.stderr)
            return 2
    unset, rest = split_unset_keys(rest)
    saved_argv = sys.argv
    sys.argv = [saved_argv[0]] + rest  # OpenPrompt's get_config reads sys.argv
    try:
        config, args = get_config()
        set_unset_keys(config, unset)
    except TypeError as e:  # OpenPrompt's update_cfg_with_argparser raises a bare TypeError on a type mismatch
        given = [a for a in rest if a.startswith("--") and "." in a]
        print(f"error: a command-line value does not have the type of its YAML key ({e or 'TypeError'}); "
              f"check {', '.join(given) or 'the --section.key options'}", file=sys.stderr)
        return 2
    finally:
        sys.argv = saved_argv
    if config.task != "classification":
        print(f"error: task: {config.task} is not supported: our templates feed masked-LM classifiers", file=sys.stderr)
        return 2
    if bad_seed(config.reproduce.seed):
        print(f"error: {bad_seed(config.reproduce.seed)}", file=sys.stderr)
        return 2
    if args.resume and args.test:
        print("error: --resume and --test cannot be used together", file=sys.stderr)
        return 2
    yaml_dir = os.path.dirname(os.path.abspath(args.config_yaml))
    for section in (config.template, config.verbalizer):
        beside_yaml(config, section, yaml_dir)
    fix_device(config)
    try:
        train, dev, test, labels = load_examples(args.config_yaml, data_root, config)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    with root_logger_restored():
        return _train(config, args, train, dev, test, labels)


def _train(config, args, train, dev, test, labels) -> int:
    from openprompt.config import save_config_to_yaml
    from openprompt.data_utils import FewShotSampler
    from openprompt.utils.logging import config_experiment_dir, init_logger

    if args.resume or args.test:
        exp_path = config.logging.path = args.resume or args.test
    else:
        os.makedirs(config.logging.path_base, exist_ok=True)  # change 6
        exp_path = config_experiment_dir(config)
        init_logger(os.path.join(exp_path, "log.txt"), config.logging.file_level, config.logging.console_level)
        save_config_to_yaml(config)
    seed_everything(config.reproduce.seed)
    try:
        if config.learning_setting == "few_shot":
            sampling = config.sampling_from_train
            for seed in sampling.seed:
                sampler = FewShotSampler(num_examples_per_label=sampling.num_examples_per_label,
                                         also_sample_dev=sampling.also_sample_dev,
                                         num_examples_per_label_dev=sampling.num_examples_per_label_dev)
                few_train, few_dev = sampler(train_dataset=train, valid_dataset=dev, seed=seed)
                seed_everything(config.reproduce.seed)
                run_one(config, os.path.join(exp_path, f"seed-{seed}"), labels, few_train, few_dev, test,
                        resume=args.resume, test_dir=args.test)
        else:
            run_one(config, exp_path, labels, train, dev, test, resume=args.resume, test_dir=args.test,
                    zero=config.learning_setting == "zero_shot")
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    print(f"run directory: {exp_path}")
    return 0


@contextlib.contextmanager
def root_logger_restored():
    """OpenPrompt's ``init_logger`` makes the root logger's handlers a console one bound to this moment's stderr and a
    file one, at INFO: for the run only. Called from Python (a notebook, a test), they stayed: every later library
    log went to the run's ``log.txt`` (kept open) and to a stream that may be closed ("--- Logging error ---")."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers, root.level = handlers, level


if __name__ == "__main__":
    sys.exit(main())
