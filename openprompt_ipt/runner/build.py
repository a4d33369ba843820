"""The model a configuration describes: backbone -> template and verbalizer (through OpenPrompt's
registry) -> ``PromptForClassification``. ``experiment.run_experiment`` and the peer methods
(``peers.build_peer``) both start from it."""
from __future__ import annotations

from typing import Dict, List, Sequence


def seen_vocab_ids(examples: Sequence, tokenizer) -> List[int]:
    ids = set()
    for ex in examples:
        for text in (ex.text_a, ex.text_b):
            if text:
                ids.update(tokenizer(text, add_special_tokens=False)["input_ids"])
    return sorted(ids)


def check_label_words(cfg: Dict, labels: Sequence[str]) -> None:
    """The verbalizer must name one entry per task label, in the task's label order."""
    section = cfg.get(cfg["verbalizer"]) or {}
    words = section.get("label_words")
    if words is not None and len(words) != len(labels):
        raise ValueError(f"{cfg['verbalizer']}.label_words has {len(words)} entries but task "
                         f"'{cfg['dataset']['name']}' has {len(labels)} labels {list(labels)}: give one per label, in that order")
    classes = section.get("classes")
    if classes is not None and len(classes) != len(labels):
        raise ValueError(f"{cfg['verbalizer']}.classes has {len(classes)} entries but task "
                         f"'{cfg['dataset']['name']}' has {len(labels)} labels {list(labels)}")


def build_model(cfg: Dict, train_examples, num_classes: int, labels: Sequence[str] | None = None):
    from openprompt import PromptForClassification
    from openprompt.prompts import load_template, load_verbalizer
    from yacs.config import CfgNode

    from .plm import load_backbone

    if cfg["verbalizer"] != "regression_head":  # one score: no label words to count
        check_label_words(cfg, labels if labels is not None else [str(i) for i in range(num_classes)])
    model, tokenizer, wrapper_class = load_backbone(cfg["plm"]["model_path"], cfg["plm"].get("model_name"),
                                                    verbalizer=cfg["verbalizer"])
    section = dict(cfg.get(cfg["template"]) or {})
    if cfg["train"].get("vocab_rows") == "seen":  # restrict vocab tables to ids the training text uses
        if cfg["template"] == "instance_wise":
            section["vocab_rows"] = seen_vocab_ids(train_examples, tokenizer)
        elif str(section.get("generator", "")).startswith("ipt_"):
            section["ipt"] = {**(section.get("ipt") or {}), "vocab_rows": seen_vocab_ids(train_examples, tokenizer)}
    verb_section = {"num_classes": num_classes, **(cfg.get(cfg["verbalizer"]) or {})}
    node = CfgNode({"template": cfg["template"], cfg["template"]: section,
                    "verbalizer": cfg["verbalizer"], cfg["verbalizer"]: verb_section}, new_allowed=True)
    template = load_template(node, model=model, tokenizer=tokenizer)
    if getattr(template, "text", "") is None:  # OpenPrompt says "template text has not been initialized" at the first row
        name = cfg["template"]
        raise ValueError(f"{name}.text is not set: give the template's text in the {name}: section (e.g. text: "
                         "'{\"placeholder\":\"text_a\"} It was {\"mask\"}.'), or " f"{name}.file_path")
    if "sparse" not in section and "sparse" not in (section.get("ipt") or {}):
        from ..generators.vocab_table import use_sparse_rows  # the runner's own default: sparse row updates
        use_sparse_rows(template)
    verbalizer = load_verbalizer(node, model=model, tokenizer=tokenizer)
    from .plm import skip_unread_mlm_head

    skip_unread_mlm_head(model, verbalizer)
    freeze = bool(cfg["plm"]["freeze"])
    if not freeze and getattr(template, "injection", None) == "late":
        raise ValueError("plm.freeze: false with injection: late would leave the layers below late_layer untrained (the "
                         "backward stops at the late prompt): set plm.freeze: true")
    # plm_eval_mode turns the frozen PLM's dropout off; plm.frozen_dropout keeps it on (the authors' runs)
    eval_mode = freeze and not cfg["plm"].get("frozen_dropout", False)
    prompt_model = PromptForClassification(model, template, verbalizer, freeze_plm=freeze, plm_eval_mode=eval_mode)
    return prompt_model, tokenizer, wrapper_class
