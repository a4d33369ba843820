"""PEFT's prompt / prefix tuning under our protocol, the peer row of the accuracy study:

    python benchmarks/peft_run.py --peft prompt --config yamls/cb_prompt_tuning.yaml --seeds 1

It is ``experiments/run.py`` (same options, output layout ``<output-dir>/<yaml stem>/seed<k>/`` and
metrics.json schema) with the model swapped: the YAML's data, splits, backbone, template text
(prompt-free, so PEFT sees plain token ids with the mask), SoftVerbalizer head and train section
(epochs, batch size, lr_prompt for PEFT's parameters, lr_head, scheduler, selection on dev, test
once) go through our own ``run_experiment`` and Trainer, so budget and selection are identical.
num_virtual_tokens = the YAML's prompt positions (instance_wise: task_prompt_length [+ prompt_length];
generated_prefix: prompt_length, with its MLP reparameterisation when ``prefix.reparameterize``).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peft_peer import KINDS, PeftClassifier, require_peft  # noqa: E402

LABELS = {"prompt": "PEFT prompt tuning", "prefix": "PEFT prefix tuning"}


def virtual_tokens(cfg) -> int:
    """The prompt positions of the YAML's own method, so the peer gets as many."""
    s = cfg.get(cfg["template"]) or {}
    if cfg["template"] == "instance_wise":
        n = int(s.get("task_prompt_length") or 0)
        n += int(s.get("prompt_length") or 0) if s.get("strategy", "none") != "none" else 0
    else:
        n = int(s.get("prompt_length") or 0)
    if n <= 0:
        raise ValueError(f"{cfg['template']} of this config has no prompt positions to give PEFT")
    return n


def peer_settings(cfg, kind: str, prompt_init: str):
    prefix = (cfg.get(cfg["template"]) or {}).get("prefix") or {}
    reparam = kind == "prefix" and bool(prefix.get("reparameterize"))
    return {"library": "peft", "version": require_peft().__version__, "kind": kind,
            "num_virtual_tokens": virtual_tokens(cfg), "prompt_init": prompt_init if kind == "prompt" else None,
            "prefix_projection": reparam, "encoder_hidden_size": int(prefix.get("reparam_hidden") or 0) if reparam else None}


def build_peer(cfg, train, num_classes, labels):
    """``build_model`` of the YAML with a prompt-free template, then PEFT around its frozen backbone."""
    from openprompt_ipt.runner.experiment import build_model

    peer = cfg["peer"]
    if not cfg["plm"].get("freeze", True):
        raise ValueError("the PEFT peer tunes prompts on a frozen backbone: plm.freeze must be true")
    text = (cfg.get(cfg["template"]) or {}).get("text")
    plain = dict(cfg, template="instance_wise", instance_wise={"text": text, "strategy": "none", "task_prompt_length": 0})
    pm, tokenizer, wrapper_class = build_model(plain, train, num_classes, labels)
    model = PeftClassifier(pm.plm, pm.template, pm.verbalizer, peer["kind"], peer["num_virtual_tokens"],
                           prompt_init=peer["prompt_init"] or "sample_vocab",
                           prefix_projection=peer["prefix_projection"], encoder_hidden_size=peer["encoder_hidden_size"] or 0,
                           frozen_dropout=bool(cfg["plm"].get("frozen_dropout")))  # as build_model's plm_eval_mode
    return model, tokenizer, wrapper_class


def run_peer(kind: str, prompt_init: str, cfg, *args, **kwargs):
    from openprompt_ipt.runner.experiment import run_experiment

    # recorded in config.json (and checked on --resume) so the run says what it was
    cfg = dict(cfg, peer=peer_settings(cfg, kind, prompt_init))
    return run_experiment(cfg, *args, build=build_peer, method=LABELS[kind], **kwargs)


def _run_py():
    spec = importlib.util.spec_from_file_location("experiments_run", os.path.join(ROOT, "experiments", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    run_py = _run_py()
    p = run_py.build_parser(__doc__.split("\n")[0])
    p.add_argument("--peft", choices=KINDS, required=True, help="PEFT PromptTuningConfig or PrefixTuningConfig")
    p.add_argument("--prompt-init", choices=["sample_vocab", "random"], default="sample_vocab",
                   help="prompt tuning init: sample_vocab = Lester et al.'s, as our Prompt Tuning (PEFT's default: random)")
    try:
        require_peft()
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    return run_py.main(argv, parser=p, run_for=lambda a: functools.partial(run_peer, a.peft, a.prompt_init))


if __name__ == "__main__":
    sys.exit(main())
