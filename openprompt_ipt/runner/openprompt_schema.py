"""OpenPrompt's experiment-YAML schema (``experiments/*.yaml`` in thunlp/OpenPrompt) -> our config.

``load_config`` calls ``to_ours`` when ``looks_like_openprompt``: every OpenPrompt key either maps
onto what our runner does with the same meaning, is reported in a note (kept for OpenPrompt but
without effect here), or is refused in one line naming the key. The table is in docs/openprompt.md.
Keys of our own schema may be mixed in (e.g. ``--set dataset.max_train=32``); they win over mapped values.
"""
from __future__ import annotations

import copy
import os
from types import SimpleNamespace
from typing import Dict, List, Optional, Tuple

from .defaults import DEFAULTS, did_you_mean
from .run_dirs import RUN_COMMAND, launch_target
from .schema import INT_NONNEG, SCHEMA, Number, check_value

OURS_TEMPLATES = ("instance_wise", "generated_prefix")
# top-level sections only OpenPrompt's schema has (ours: seed, output_dir, dataset, plm, template,
# verbalizer, train, test, protocol, selection, sweep)
OPENPROMPT_SECTIONS = {"environment", "reproduce", "logging", "checkpoint", "dataloader", "dev", "task",
                       "classification", "generation", "relation_classification", "learning_setting",
                       "zero_shot", "few_shot", "sampling_from_train", "calibrate", "contextualized_calibrate",
                       "pmi_calibrate"}
OUR_TOP = {"seed", "output_dir", "protocol", "selection", "sweep"}
# dataset.name as OpenPrompt's processors spell it -> our task
DATASETS = {"super_glue.cb": "cb", "cb": "cb", "super_glue.rte": "rte", "rte": "rte",
            "super_glue.boolq": "boolq", "boolq": "boolq", "super_glue.multirc": "multirc", "multirc": "multirc",
            "agnews": "agnews", "imdb": "imdb", "sst-2": "sst2"}
MLM_MODELS = ("bert", "roberta", "albert", "electra")  # OpenPrompt's masked-LM plm.model_name values
VERBALIZERS = ("manual_verbalizer", "soft_verbalizer")  # trained by a plain classification loss
METRICS = {"micro-f1": "accuracy", "accuracy": "accuracy", "macro-f1": "macro_f1"}  # micro-F1 = accuracy (one label)
DEFAULT_EPOCHS = 5     # OpenPrompt's config_default: train.num_epochs
DEFAULT_SEED = 100     # OpenPrompt's config_default: reproduce.seed


class OpenPromptKeyError(ValueError):
    """An OpenPrompt key our runner cannot honour; the message names it and the fix."""


def _value(op_key: str, value, ours=None):
    """An OpenPrompt key's number checked as our key ``ours`` (a SCHEMA key or a spec; default: the
    same name), the error naming the key as the YAML wrote it: ``num_epochs: 1.5`` must not become 1."""
    spec = SCHEMA[ours or op_key] if isinstance(ours or op_key, str) else ours
    return check_value(op_key, value, spec)


def looks_like_openprompt(raw: Dict) -> bool:
    plm, train = raw.get("plm"), raw.get("train")
    return (bool(OPENPROMPT_SECTIONS & set(raw))
            # not plm.model_name alone: our schema has it too (checked against the checkpoint)
            or (isinstance(plm, dict) and bool({"optimize", "specials_to_add"} & set(plm)))
            or (isinstance(train, dict) and bool({"num_epochs", "num_training_steps"} & set(train))))


def _section(raw: Dict, key: str) -> Dict:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OpenPromptKeyError(f"{key}: expected a section (key: value lines), got {value!r}")
    return value


def _resolve_file(path: str, base_dir: str, key: str) -> str:
    """OpenPrompt reads ``file_path`` relative to the working directory; we also try the YAML's folder,
    so the label-word / template files beside a YAML work from anywhere."""
    for candidate in ([path] if os.path.isabs(path) else [os.path.join(base_dir, path), path]):
        if os.path.isfile(candidate):
            return candidate
    raise OpenPromptKeyError(f"{key}: file '{path}' not found (looked beside the YAML in '{base_dir}' and in the "
                             "working directory): fix the path, or give the text / label_words inline")


def read_template_text(path: str, choice: Optional[int], base_dir: str, key: str) -> str:
    """Line ``choice`` of a template file, as OpenPrompt's ``Template.from_file`` reads it."""
    with open(_resolve_file(path, base_dir, key)) as f:
        lines = f.readlines()
    choice = _value(f"{key.rsplit('.', 1)[0]}.choice", choice or 0, INT_NONNEG)
    if not 0 <= choice < len(lines) or not lines[choice].strip():
        raise OpenPromptKeyError(f"{key.rsplit('.', 1)[0]}.choice: {choice} names no template line in '{path}' "
                                 f"({len(lines)} lines)")
    return lines[choice].rstrip()


def read_label_words(path: str, choice: Optional[int], base_dir: str, key: str, labels):
    """Label words from a verbalizer file, parsed by OpenPrompt's own ``Verbalizer.from_file``
    (txt/csv: a line per class, words split by commas; json/jsonl: a list or a {label: words} dict).
    ``labels`` None (own data without dataset.labels): a {label: words} file stays a dict, defining the labels."""
    from openprompt.prompt_base import Verbalizer

    holder = SimpleNamespace(num_classes=None)
    try:
        Verbalizer.from_file(holder, _resolve_file(path, base_dir, key),
                              _value(f"{key.rsplit('.', 1)[0]}.choice", choice or 0, INT_NONNEG))
    except RuntimeError as e:  # "choice N exceed the number of verbalizers"
        raise OpenPromptKeyError(f"{key.rsplit('.', 1)[0]}.choice: {e}") from e
    words = getattr(holder, "label_words", None)
    if isinstance(words, dict) and labels is None:
        return {str(lab): [w] if isinstance(w, str) else list(w) for lab, w in words.items()}
    if isinstance(words, dict):  # {label name: words}: put them in the task's label order
        missing = [lab for lab in labels if lab not in words]
        if missing:
            raise OpenPromptKeyError(f"{key}: '{path}' names labels {sorted(words)} but the task's are {list(labels)}")
        words = [words[lab] for lab in labels]
    if not isinstance(words, list):
        raise OpenPromptKeyError(f"{key}: '{path}' holds no label words OpenPrompt can read")
    return [[w] if isinstance(w, str) else list(w) for w in words]


def _refuse_unknown(section: Dict, where: str, known, ours=()) -> None:
    for key in section:
        if key not in known and key not in ours:
            raise OpenPromptKeyError(f"unknown key '{where}.{key}' in an OpenPrompt-schema YAML"
                                     f"{did_you_mean(key, list(known) + list(ours))}")


def to_ours(raw: Dict, base_dir: str = ".", gpus: Optional[int] = None,
            run_command: str = RUN_COMMAND) -> Tuple[Dict, List[str]]:
    """(our raw config, notes) for an OpenPrompt-schema YAML ``raw``; ``base_dir`` is the YAML's folder
    (for template / verbalizer ``file_path``), ``gpus`` the CUDA devices here (default: counted),
    ``run_command`` what the user ran (the notes name it)."""
    from ..data.tasks import TASKS

    raw = copy.deepcopy(raw)
    notes: List[str] = []
    out: Dict = {"dataset": {}, "plm": {}, "train": {}, "test": {}}
    ours_explicit: Dict[str, Dict] = {}  # keys of our own schema written in the YAML / --set: applied last

    def take_ours(section: str, data: Dict, op_keys) -> None:
        mine = {k: v for k, v in data.items() if k not in op_keys and k in DEFAULTS[section]}
        ours_explicit[section] = mine

    known_top = (OPENPROMPT_SECTIONS | OUR_TOP | {"dataset", "plm", "train", "test", "template", "verbalizer"})
    template = raw.get("template")
    verbalizer = raw.get("verbalizer")
    # ---- task
    task_kind = raw.get("task") or "classification"
    if task_kind != "classification":
        raise OpenPromptKeyError(f"task: {task_kind} is not supported: our runner trains classification "
                                 "(instance-wise prompts for masked LMs); use OpenPrompt's own runner for it")
    cls = _section(raw, "classification")
    _refuse_unknown(cls, "classification", ("parent_config", "metric", "loss_function"))
    metric = cls.get("metric")
    if metric:
        first = metric[0] if isinstance(metric, list) else metric
        if first not in METRICS:
            raise OpenPromptKeyError(f"classification.metric: {first} is not one we select on "
                                     f"(supported: {sorted(METRICS)})")
        out["train"]["metric"] = METRICS[first]
    if cls.get("loss_function") not in (None, "cross_entropy"):
        raise OpenPromptKeyError(f"classification.loss_function: {cls['loss_function']} is not supported "
                                 "(our trainer uses cross_entropy)")
    if raw.get("calibrate"):
        raise OpenPromptKeyError(f"calibrate: {raw['calibrate']} is not supported (our runner does no calibration): "
                                 "leave it empty")
    # ---- dataset
    ds = _section(raw, "dataset")
    name = ds.get("name")
    if name is None:
        raise OpenPromptKeyError("dataset.name is empty: name an OpenPrompt dataset, e.g. super_glue.cb")
    task_name = DATASETS.get(str(name).lower()) or (str(name) if str(name) in TASKS else None)
    if task_name is None:
        raise OpenPromptKeyError(f"dataset.name: {name} has no task in our runner{did_you_mean(str(name), DATASETS)} "
                                 f"(supported: {sorted(DATASETS)} and our names {sorted(TASKS)})")
    _refuse_unknown(ds, "dataset", ("name", "path"), DEFAULTS["dataset"])
    out["dataset"]["name"] = task_name
    if ds.get("path"):
        out["dataset"]["path"] = ds["path"]  # relative paths resolve under the data root, as ours do
    take_ours("dataset", ds, ("name", "path"))
    labels = TASKS[task_name].labels
    # ---- plm
    plm = _section(raw, "plm")
    _refuse_unknown(plm, "plm", ("model_name", "model_path", "specials_to_add", "optimize"), DEFAULTS["plm"])
    model_name = plm.get("model_name")
    if model_name is not None and str(model_name).lower() not in MLM_MODELS:
        raise OpenPromptKeyError(f"plm.model_name: {model_name} is not a masked LM: our templates feed encoder "
                                 f"classifiers (supported: {list(MLM_MODELS)}); T5 / GPT generation is not supported")
    if model_name is not None:
        out["plm"]["model_name"] = str(model_name).lower()  # checked against the checkpoint's model_type
    if plm.get("model_path"):
        out["plm"]["model_path"] = plm["model_path"]
    elif "model_path" in plm:  # written but empty (absent: our default backbone)
        raise OpenPromptKeyError("plm.model_path is empty: a hub name, a local checkpoint folder, or 'minilm' "
                                 "(the offline backbone)")
    if plm.get("specials_to_add") not in (None, ["<pad>"]):
        notes.append(f"plm.specials_to_add {plm['specials_to_add']} not added (the tokenizer's own tokens are used)")
    popt = plm.get("optimize") or {}
    _refuse_unknown(popt, "plm.optimize", ("name", "freeze_para", "no_decay", "lr", "weight_decay", "betas", "eps",
                                           "scheduler"))
    freeze = bool(popt.get("freeze_para", False))  # OpenPrompt's default trains the PLM
    if "freeze_para" not in popt:
        notes.append("plm.optimize.freeze_para not set: OpenPrompt's default trains the PLM (fine-tuning)")
    out["plm"]["freeze"] = freeze
    if freeze:  # experiments/cli.py passes freeze_plm but not plm_eval_mode: the frozen PLM keeps its dropout
        out["plm"]["frozen_dropout"] = True
    else:
        for op_key, key in (("lr", "lr_plm"), ("weight_decay", "weight_decay"), ("betas", "adam_betas"),
                            ("eps", "adam_eps")):
            if popt.get(op_key) is not None:
                out["train"][key] = list(popt[op_key]) if op_key == "betas" else popt[op_key]
        if popt.get("weight_decay"):
            notes.append(f"plm.optimize.weight_decay {popt['weight_decay']} applies to every trained part here "
                         "(OpenPrompt: PLM weights except bias / LayerNorm)")
        sched = popt.get("scheduler")
        if isinstance(sched, dict) and sched.get("num_warmup_steps") is not None:
            out["train"]["warmup_steps"] = _value("plm.optimize.scheduler.num_warmup_steps", sched["num_warmup_steps"],
                                                  "train.warmup_steps")
    take_ours("plm", plm, ("model_path", "model_name"))
    # ---- dataloader
    dl = _section(raw, "dataloader")
    _refuse_unknown(dl, "dataloader", ("max_seq_length", "decoder_max_length", "truncate_method", "decode_from_pad"))
    if dl.get("max_seq_length") is not None:
        out["plm"]["max_seq_length"] = _value("dataloader.max_seq_length", dl["max_seq_length"], "plm.max_seq_length")
    if dl.get("truncate_method") not in (None, "balanced"):
        notes.append(f"dataloader.truncate_method {dl['truncate_method']}: our runner truncates 'balanced' only "
                     "(python -m openprompt_ipt.openprompt.cli uses OpenPrompt's head / tail)")
    # ---- train / dev / test
    tr = _section(raw, "train")
    op_train = ("num_epochs", "num_training_steps", "batch_size", "shuffle_data", "teacher_forcing",
                "gradient_accumulation_steps", "max_grad_norm", "train_verblizer", "clean")
    _refuse_unknown(tr, "train", op_train, DEFAULTS["train"])
    if tr.get("teacher_forcing"):
        raise OpenPromptKeyError("train.teacher_forcing: true is for generation; leave it false")
    if tr.get("shuffle_data") is False:
        notes.append("train.shuffle_data false: we always shuffle training batches (seeded)")
    for key in ("train_verblizer", "clean"):
        if tr.get(key) is not None:
            notes.append(f"train.{key} ({tr[key]}) has no effect here: head and template train together")
    if tr.get("num_training_steps") is not None:  # OpenPrompt: steps win over epochs
        out["train"]["max_steps"] = _value("train.num_training_steps", tr["num_training_steps"], "train.max_steps")
    else:
        out["train"]["epochs"] = (_value("train.num_epochs", tr["num_epochs"], "train.epochs")
                                  if tr.get("num_epochs") is not None else DEFAULT_EPOCHS)
    for key in ("batch_size", "gradient_accumulation_steps"):
        if tr.get(key) is not None:
            out["train"][key] = _value(f"train.{key}", tr[key])
    if tr.get("max_grad_norm") is not None:
        out["train"]["max_grad_norm"] = max(0.0, _value("train.max_grad_norm", tr["max_grad_norm"], Number()))  # OpenPrompt: < 0 = no clipping
    take_ours("train", tr, op_train)
    for split in ("dev", "test"):
        sec = _section(raw, split)
        _refuse_unknown(sec, split, ("batch_size", "shuffle_data"))
    test_bs = _section(raw, "test").get("batch_size") or _section(raw, "dev").get("batch_size")
    if test_bs:
        out["test"]["batch_size"] = _value("test.batch_size", test_bs)
    # ---- template
    from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS

    if template not in OURS_TEMPLATES:
        if template in TEMPLATE_CLASS:
            raise OpenPromptKeyError(f"template: {template} is OpenPrompt's own: switch it to instance_wise (Prompt "
                                     "Tuning / IPT) or generated_prefix (prefix / P-tuning v2 / IDPG) with that "
                                     "section, see docs/openprompt.md")
        raise OpenPromptKeyError(f"template: {template!r} is unknown{did_you_mean(str(template), OURS_TEMPLATES)}: use "
                                 f"one of {list(OURS_TEMPLATES)}")
    out["template"] = template
    section = dict(_section(raw, template))
    if section.get("file_path") is not None:
        if section.get("text") is not None:
            raise OpenPromptKeyError(f"{template}: give text or file_path, not both")
        section["text"] = read_template_text(section["file_path"], section.get("choice"), base_dir,
                                             f"{template}.file_path")
    for key in ("file_path", "choice", "parent_config"):
        section.pop(key, None)
    if section.pop("mask_token", "<mask>") != "<mask>":
        notes.append(f"{template}.mask_token ignored: the template text marks the mask with {{\"mask\"}}")
    topt = section.pop("optimize", None)
    if topt:
        _refuse_unknown(topt, f"{template}.optimize", ("name", "lr", "adam_epsilon", "eps", "betas", "weight_decay",
                                                       "no_decay", "scheduler"))
        if str(topt.get("name", "AdamW")).lower() != "adamw":
            raise OpenPromptKeyError(f"{template}.optimize.name: {topt['name']} is not supported (AdamW only)")
        if topt.get("lr") is not None:
            out["train"]["lr_prompt"] = _value(f"{template}.optimize.lr", topt["lr"], "train.lr_prompt")
        eps = topt.get("adam_epsilon", topt.get("eps"))
        if eps is not None:
            out["train"]["adam_eps"] = _value(f"{template}.optimize.adam_epsilon", eps, "train.adam_eps")
        if topt.get("betas") is not None:
            out["train"]["adam_betas"] = list(topt["betas"])
        if topt.get("weight_decay"):
            notes.append(f"{template}.optimize.weight_decay ignored, as OpenPrompt's trainer does (it builds the "
                         "template's AdamW from lr and eps only)")
        sched = topt.get("scheduler")
        if isinstance(sched, dict) and sched.get("num_warmup_steps") is not None:
            out["train"]["warmup_steps"] = _value(f"{template}.optimize.scheduler.num_warmup_steps",  # the template's wins
                                                  sched["num_warmup_steps"], "train.warmup_steps")
        if sched is None and freeze:
            out["train"]["scheduler"] = "constant"  # OpenPrompt: no scheduler -> a fixed rate
            out["train"].setdefault("warmup_steps", 0)
    else:
        notes.append(f"{template}.optimize is empty: OpenPrompt would not train the template; we train it at "
                     "train.lr_prompt")
    out[template] = section
    # ---- verbalizer
    if verbalizer is None:
        raise OpenPromptKeyError(f"verbalizer is empty: name one of {list(VERBALIZERS)} and give its section")
    if verbalizer not in VERBALIZERS:
        why = (" by our runner (automatic / knowledgeable / proto verbalizers need OpenPrompt's own trainer)"
               if verbalizer in VERBALIZER_CLASS else did_you_mean(str(verbalizer), VERBALIZERS))
        raise OpenPromptKeyError(f"verbalizer: {verbalizer} is not supported{why}: use one of {list(VERBALIZERS)}")
    out["verbalizer"] = verbalizer
    vsec = dict(_section(raw, verbalizer))
    if vsec.get("file_path") is not None:
        if vsec.get("label_words") is not None:
            raise OpenPromptKeyError(f"{verbalizer}: give label_words or file_path, not both")
        vsec["label_words"] = read_label_words(vsec["file_path"], vsec.get("choice"), base_dir,
                                               f"{verbalizer}.file_path", labels)
    for key in ("file_path", "choice", "parent_config"):
        vsec.pop(key, None)
    vopt = vsec.pop("optimize", None)
    if vopt and vopt.get("lr") is not None:
        out["train"]["lr_head"] = _value(f"{verbalizer}.optimize.lr", vopt["lr"], "train.lr_head")
    out[verbalizer] = vsec
    for key in set(raw) - known_top:  # other templates' / verbalizers' sections: unused, as in OpenPrompt
        if key not in TEMPLATE_CLASS and key not in VERBALIZER_CLASS:
            raise OpenPromptKeyError(f"unknown key '{key}' in an OpenPrompt-schema YAML{did_you_mean(key, known_top)}")
    # ---- learning setting -> protocol
    setting = raw.get("learning_setting") or "full"
    if setting == "few_shot":
        fs = _section(raw, "few_shot")
        sampling = fs.get("few_shot_sampling") or "sampling_from_train"
        if sampling != "sampling_from_train":
            raise OpenPromptKeyError(f"few_shot.few_shot_sampling: {sampling} is not supported (sampling_from_train)")
        sam = _section(raw, "sampling_from_train")
        _refuse_unknown(sam, "sampling_from_train", ("parent_config", "num_examples_per_label", "also_sample_dev",
                                                     "num_examples_per_label_dev", "seed"))
        k = _value("sampling_from_train.num_examples_per_label", sam.get("num_examples_per_label", 10), "protocol.k")
        if not sam.get("also_sample_dev", True):
            raise OpenPromptKeyError("sampling_from_train.also_sample_dev: false is not supported: our few-shot "
                                     "protocol samples K per label for dev too (set it true)")
        out["protocol"] = {"name": "few_shot", "k": k, "k_per": "label",
                           "dev_k": _value("sampling_from_train.num_examples_per_label_dev",
                                           sam.get("num_examples_per_label_dev") or k, "protocol.dev_k")}
        seed = sam.get("seed")
        if isinstance(seed, list):
            if len(seed) != 1:
                raise OpenPromptKeyError(f"sampling_from_train.seed lists {len(seed)} seeds: keep one and run the "
                                         f"others with --seeds {','.join(str(s) for s in seed)}")
            seed = seed[0]
        if seed is not None:
            out["seed"] = _value("sampling_from_train.seed", seed, "seed")  # our runner draws the K examples with the run seed
    elif setting != "full":
        raise OpenPromptKeyError(f"learning_setting: {setting} is not supported (full or few_shot; zero-shot "
                                 "trains nothing)")
    # ---- reproduce / environment / logging / checkpoint
    rep = _section(raw, "reproduce")
    _refuse_unknown(rep, "reproduce", ("seed", "random_seed", "torch_seed", "numpy_seed", "cuda_seed"))
    if rep.get("seed") is not None:
        if "seed" in out and out["seed"] != rep["seed"]:
            notes.append(f"reproduce.seed {rep['seed']} ignored: the few-shot sampling seed {out['seed']} seeds "
                         "the run (our runner uses one seed for sampling and initialisation)")
        else:
            out["seed"] = _value("reproduce.seed", rep["seed"], "seed")
    out.setdefault("seed", DEFAULT_SEED)
    if any(rep.get(k) not in (None, -1) for k in ("random_seed", "torch_seed", "numpy_seed", "cuda_seed")):
        notes.append("reproduce.random_seed/torch_seed/numpy_seed/cuda_seed ignored: reproduce.seed seeds all")
    env = _section(raw, "environment")
    _refuse_unknown(env, "environment", ("num_gpus", "cuda_visible_devices", "local_rank"))
    num_gpus = _value("environment.num_gpus", env.get("num_gpus") or 0, INT_NONNEG)
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
    if num_gpus > gpus:
        raise OpenPromptKeyError(f"environment.num_gpus: {num_gpus} but this machine has {gpus} CUDA GPU(s): set it "
                                 f"to {gpus}{' (CPU)' if gpus == 0 else ''}")
    if "environment" in raw:
        out["train"]["device"] = "cpu" if num_gpus == 0 else "cuda"
    if num_gpus > 1:
        notes.append(f"environment.num_gpus {num_gpus}: one process uses one GPU; for {num_gpus} run "
                     f"accelerate launch --num_processes {num_gpus} {launch_target(run_command)} ...")
    if env.get("cuda_visible_devices"):
        notes.append("environment.cuda_visible_devices ignored: set CUDA_VISIBLE_DEVICES in the environment")
    log = _section(raw, "logging")
    if log.get("path_base"):
        out["output_dir"] = log["path_base"]
    ckpt = _section(raw, "checkpoint")
    if ckpt.get("save_best") is False or ckpt.get("save_latest") is False or ckpt.get("save_lastest") is False:
        notes.append("checkpoint.save_best/save_latest false: we still write best.safetensors and step checkpoints "
                     "(train.checkpoint_every, keep_checkpoints)")
    if ckpt.get("higher_better") is False:
        raise OpenPromptKeyError("checkpoint.higher_better: false is not supported (every metric we select on is "
                                 "higher-better)")
    # ---- our own keys written beside OpenPrompt's win
    for section, mine in ours_explicit.items():
        if section == "train" and "epochs" in mine and "max_steps" not in mine:
            out["train"].pop("max_steps", None)
        out[section].update(mine)
    for key in OUR_TOP & set(raw):
        out[key] = raw[key]
    return out, notes

