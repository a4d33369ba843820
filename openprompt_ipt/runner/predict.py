"""Predict with a trained run: its prompt + head loaded onto its PLM (named by the run's config).

``load_run(run_dir)`` (a seed directory, or any directory the runner printed: ``run_dirs.find_run``)
reads ``config.json``, loads the backbone from ``plm.model_path``, rebuilds the template from
``template/`` (its saved arguments, e.g. the vocab rows a ``vocab_rows: seen`` run kept) and the
verbalizer from the config, then loads ``best.safetensors`` (every trained parameter of the
selected epoch: prompt, head, and the PLM when it was fine-tuned). ``Predictor.predict(rows)`` takes
rows in the task's own format (dicts, e.g. CB ``{"premise", "hypothesis"}``; a label is optional) and
returns ``{"guid", "label", "probabilities"}`` per example; a regression run (STS-B, ``regression_head``)
returns ``{"guid", "score"}``, the score on the task's own scale (STS-B: 0-5).
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Callable, Dict, Iterable, List, Optional

import torch

from ..serialization import iter_jsonl
from .run_dirs import RUN_COMMAND, find_run


class Predictor:
    # how to leave bad rows out, named at the end of the BadRows error (the CLI names the command the user ran)
    skip_hint = "predict(rows, on_bad_row=...), or the command's --skip-bad-rows"

    def __init__(self, run_dir: str, model, tokenizer, wrapper, cfg: Dict, device):
        from ..data import get_task

        self.run_dir, self.model, self.tokenizer, self.wrapper, self.cfg, self.device = \
            run_dir, model, tokenizer, wrapper, cfg, device
        self.task = get_task(cfg["dataset"]["name"], cfg["dataset"])
        self.labels = list(self.task.labels)

    def examples(self, rows: Iterable[Dict], on_bad_row: Optional[Callable[[str], None]] = None) -> List:
        """Examples of ``rows``. A row whose text is null, a number or empty (or missing), or whose score is
        not a number (regression), is never scored: all such rows are one ``BadRows`` error with a line per
        row (up to 20, then 'and N more'), or, with ``on_bad_row``, each is passed to it as that line and
        left out. Fields the task does not read (an id, a source) are kept: ``carried`` (per example)."""
        return self._examples(rows, on_bad_row)[0]

    def _examples(self, rows: Iterable[Dict], on_bad_row: Optional[Callable[[str], None]] = None):
        from openprompt.data_utils import InputExample

        from ..data.rows import BadRows, listed, row_name, row_problems

        rows = list(rows)
        if not rows:
            raise ValueError("no input rows: give at least one example")
        task, out, carried, bad = self.task, [], [], []
        texts = {"text_a": task.text_a, "text_b": task.text_b}
        used = set(task.text_a) | set(task.text_b) | set(task.label_field) | {"idx", "label", "guid"}
        used |= {column for _, column in getattr(task, "columns", ())}  # your own data: its label column too
        self.extra_fields = {}  # field -> rows holding it: carried to the output, named once (``extra_note``)
        for i, row in enumerate(rows):
            name = row_name(row, i)
            if not isinstance(row, dict):
                raise ValueError(f"{name} is {type(row).__name__}, not a JSON object")
            problems = row_problems(row, texts, required=task.expand is None)
            expanded = []
            if not problems:
                expanded = [task._fields(row, i)] if task.expand is None else task.expand(row, i)
                try:
                    labels = [task.label_id(raw, 0, name) if raw is not None else None for *_, raw, _ in expanded]
                except ValueError as e:  # a score that is not a number, an unknown label: a row problem
                    problems = [str(e)[len(name) + 2:] if str(e).startswith(name + ": ") else str(e)]
            if problems:
                bad.append(f"{name} {'; '.join(problems)}: not scored")
                if on_bad_row is not None:
                    on_bad_row(bad[-1])
                continue
            extra = {k: v for k, v in row.items() if k not in used} if task.expand is None else {}
            for k in extra:
                self.extra_fields[k] = self.extra_fields.get(k, 0) + 1
            for (guid, text_a, text_b, raw, meta), label in zip(expanded, labels):
                if label is None:
                    label = 0.0 if task.regression else 0
                out.append(InputExample(guid=str(guid), text_a=text_a, text_b=text_b, label=label, meta=meta))
                carried.append(extra)
        if bad and on_bad_row is None:
            raise BadRows(listed(bad), f"{len(bad)} of {len(rows)} input rows cannot be scored: fix them (every text a "
                                       f"non-empty string, every score a number), or leave them out ({self.skip_hint})")
        if not out:
            raise ValueError(f"none of the {len(rows)} input rows has a usable text")
        return out, carried

    def extra_note(self) -> str:
        """The one note about fields the task does not read (after ``predict``), or ''."""
        if not getattr(self, "extra_fields", None):
            return ""
        fields = sorted(self.extra_fields)
        return (f"note: field{'s' if len(fields) > 1 else ''} {fields} not used by task '{self.task.name}' "
                f"(it reads {list(self.task.text_a)} + {list(self.task.text_b)}): carried to the output rows as they are")

    def precision(self):
        """The autocast the run evaluated under (``train.mixed_precision``), so a bf16 run predicts as its dev and
        test scores were computed; fp16 where this device has no fp16 autocast (CPU): fp32 (``precision_note``)."""
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.cfg["train"].get("mixed_precision", "no"))
        if dtype is None or self.precision_note():
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=dtype)

    def precision_note(self) -> str:
        if self.cfg["train"].get("mixed_precision") == "fp16" and self.device.type == "cpu":
            return ("note: the run trained and evaluated under fp16 autocast (a GPU's); on CPU it predicts in fp32, "
                    "so probabilities can differ slightly from its evaluation (--device cuda to match)")
        return ""

    @torch.no_grad()
    def predict(self, rows: Iterable[Dict], batch_size: int | None = None,
                on_bad_row: Optional[Callable[[str], None]] = None) -> List[Dict]:
        """``{"guid", "label", "probabilities"}`` per example; bad rows: see ``examples``."""
        from ..data import encode_examples, make_loader
        from ..training.trainer import to_device

        exs, carried = self._examples(rows, on_bad_row)
        feats = encode_examples(exs, self.model.template, self.wrapper, desc="predict")
        loader = make_loader(feats, batch_size or self.cfg["test"]["batch_size"], self.tokenizer.pad_token_id or 0)
        self.model.eval()
        if self.task.regression:
            scores = []
            for batch in loader:
                with self.precision():
                    scores += self.model(to_device(batch, self.device)).float().squeeze(-1).tolist()
            return [_with(extra, {"guid": ex.guid, "score": self.task.unscale(v)}) for ex, v, extra in zip(exs, scores, carried)]
        probs = []
        for batch in loader:
            with self.precision():
                probs += torch.softmax(self.model(to_device(batch, self.device)).float(), -1).tolist()
        return [_with(extra, {"guid": ex.guid, "label": self.labels[max(range(len(p)), key=p.__getitem__)],
                              "probabilities": {name: round(v, 6) for name, v in zip(self.labels, p)}})
                for ex, p, extra in zip(exs, probs, carried)]


def _with(extra: Dict, prediction: Dict) -> Dict:
    """The prediction, then the input row's own extra fields (an id, a source); ours win a name clash."""
    return {**prediction, **{k: v for k, v in extra.items() if k not in prediction}}


def load_run(run_dir: str, device: str = "cpu", run_command: str = RUN_COMMAND) -> Predictor:
    from openprompt import PromptForClassification
    from openprompt.prompts import TEMPLATE_CLASS, load_verbalizer
    from yacs.config import CfgNode

    from .experiment import build_model
    from ..injection import max_positions
    from .plm import load_backbone, skip_unread_mlm_head
    from ..serialization import load_trainable
    from ..training.distributed import resolve_device

    run_dir = find_run(run_dir, run_command)  # a config dir with one seed, a sweep's seed dir: the run inside
    dev = resolve_device(device, "--device")  # before the backbone loads
    cfg_path, weights = os.path.join(run_dir, "config.json"), os.path.join(run_dir, "best.safetensors")
    from ..serialization import read_json

    retrain = f"train the run again ({run_command} ... --overwrite) or use another run"
    cfg = read_json(cfg_path, retrain)
    cfg["plm"]["model_path"] = trained_backbone(run_dir, cfg["plm"]["model_path"], run_command)
    from ..data import get_task

    task = get_task(cfg["dataset"]["name"], cfg["dataset"])
    labels, n_outputs = list(task.labels), task.num_outputs
    template_dir = os.path.join(run_dir, "template")
    peer = cfg.get("peer") or {}
    if peer.get("library"):  # benchmarks/peft_run.py: its model is built in benchmarks/, outside the package
        raise ValueError(f"'{run_dir}' is a {peer['library']} peer run (benchmarks/peft_run.py): predict loads the "
                         "runs of openprompt-ipt run / experiments/run.py only")
    if peer.get("method"):  # Adapter / Compacter / LoRA: the library's modules, then their trained weights by name
        from .peers import build_peer

        prompt_model, tokenizer, wrapper_class = build_peer(cfg, [], n_outputs, labels)
    elif os.path.isdir(template_dir):
        model, tokenizer, wrapper_class = load_backbone(cfg["plm"]["model_path"], verbalizer=cfg["verbalizer"])
        template = TEMPLATE_CLASS[cfg["template"]].from_pretrained(template_dir, model, tokenizer)
        node = CfgNode({"verbalizer": cfg["verbalizer"],
                        cfg["verbalizer"]: {"num_classes": n_outputs, **(cfg.get(cfg["verbalizer"]) or {})}},
                       new_allowed=True)
        verbalizer = load_verbalizer(node, model=model, tokenizer=tokenizer)
        # as the run built it: a fine-tuned run (plm.freeze: false) saved no weights of a head it skipped
        skip_unread_mlm_head(model, verbalizer)
        freeze = bool(cfg["plm"]["freeze"])
        prompt_model = PromptForClassification(model, template, verbalizer, freeze_plm=freeze, plm_eval_mode=freeze)
    else:  # templates without save_pretrained: rebuilt from the config alone
        prompt_model, tokenizer, wrapper_class = build_model(cfg, [], n_outputs, labels)
    load_trainable(prompt_model, weights, retrain, complete=True)  # a tensor left out would predict untrained
    n_prefix = getattr(prompt_model.template, "n_prefix", 0)
    max_len = min(int(cfg["plm"]["max_seq_length"]), max_positions(prompt_model.plm.config) - n_prefix)
    wrapper = wrapper_class(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")
    prompt_model.to(dev).eval()
    return Predictor(run_dir, prompt_model, tokenizer, wrapper, cfg, dev)


def trained_backbone(run_dir: str, model_path: str, run_command: str = RUN_COMMAND) -> str:
    """The backbone a run trained on. A local folder given by a relative path (plm.model_path: models/bert)
    named whatever that path holds in the directory predict runs in: another model there was used without
    a word, none there was an error telling to --set plm.model_path. The run's metrics.json records the
    folder (``backbone_dir``)."""
    metrics = os.path.join(run_dir, "metrics.json")
    if (os.path.isabs(model_path) and os.path.isdir(model_path)) or not os.path.isfile(metrics):
        return model_path
    from ..serialization import read_json

    recorded = read_json(metrics, f"train the run again ({run_command} ... --overwrite)").get("backbone_dir")
    if not recorded or (os.path.isabs(model_path) and os.path.normpath(model_path) != os.path.normpath(recorded)):
        return model_path  # a hub name or alias, or a run from before backbone_dir
    if not os.path.isdir(recorded):
        raise FileNotFoundError(f"the backbone run '{run_dir}' trained on, '{recorded}' (plm.model_path: {model_path}), "
                                "is gone: put the model back there, or train the run again")
    return recorded


def read_jsonl(path: str) -> List[Dict]:
    """The rows of a JSONL input file; each object row remembers its line (messages name it)."""
    from ..data.custom import decode_file
    from ..data.rows import Row

    if not os.path.isfile(path):
        raise FileNotFoundError(f"input file '{path}' not found")
    rows = [Row.at(value, n, path) if isinstance(value, dict) else value
            for n, value in iter_jsonl(io.StringIO(decode_file(path, fix="re-save it as UTF-8")), path, numbered=True)]
    if not rows:
        raise ValueError(f"input file '{path}' has no rows")
    return rows
