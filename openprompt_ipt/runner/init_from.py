"""Start a run from a finished run (IDPG A.4's supplementary training: intermediate task, then target).

``init_from: <run dir>`` (a seed directory written by ``openprompt-ipt run``) copies that run's trained
prompt / generator weights (``template/``, the best-on-dev epoch) into the new model before training;
the head (``verbalizer.*`` of its ``best.safetensors``) comes along when ``init_head`` allows it and the
label sets match. A run of another template, backbone or template structure is refused in one line,
before anything trains: the weights would load into the wrong places or not at all.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

from ..serialization import listed, load_state, read_json, read_safetensors
from .config import flat_keys
from .run_dirs import RUN_COMMAND

# template keys that say only how the text is worded: a run on another task may differ in them
WORDING_KEYS = ("text",)
TEXT_TENSORS = ("soft_embedding.",)  # the text's {"soft"} tokens: another text may have others (OpenPrompt's table)
HOST_TENSORS = ("raw_embedding",)  # the PLM's own word embedding: never in template/ (it is not the prompt's)


def read_source(run_dir: str, weights: Optional[str] = None, run_command: str = RUN_COMMAND) -> Dict:
    """The source run's config; one clear error when ``run_dir`` is not a finished run with a template
    (``weights``: the file that holds what is copied; default its ``template/``; ``run_command``: what trains a run
    where the user is, as ``runner.run_dirs.find_run`` takes it)."""
    cfg_path = os.path.join(run_dir, "config.json")
    weights = weights or os.path.join(run_dir, "template", "template.safetensors")
    for path in (cfg_path, weights):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"init_from '{run_dir}' is not a finished run: {os.path.relpath(path, run_dir)} is "
                                    "missing (point it at a seed directory of a finished run, e.g. runs/<config>/seed1)")
    return read_json(cfg_path, f"train the run '{run_dir}' again ({run_command} ... --overwrite)")


def check_compatible(cfg: Dict, source: Dict, run_dir: str, source_metrics: Optional[Dict] = None) -> None:
    """Same template class, backbone and template structure (the wording of the text may differ). A local
    backbone is compared by its folder (``backbone_dir`` in the source's metrics.json): a relative
    ``plm.model_path`` names another model in another directory."""
    from .local_paths import same_backbone

    where = f"init_from '{run_dir}'"
    if source["template"] != cfg["template"]:
        raise ValueError(f"{where} trained template '{source['template']}' but this run uses '{cfg['template']}': "
                         "start from a run of the same template")
    there, folder = source["plm"]["model_path"], (source_metrics or {}).get("backbone_dir")
    if not same_backbone(str(there), folder, str(cfg["plm"]["model_path"])):
        here = cfg["plm"]["model_path"]
        here = f"'{here}' ({os.path.abspath(here)})" if os.path.isdir(here) and not os.path.isabs(here) else f"'{here}'"
        there = f"'{there}'" + (f" ({folder})" if folder and folder != there else "")
        raise ValueError(f"{where} was trained on backbone {there} but this run uses {here}: start from a run of "
                         "the same backbone")
    mine, theirs = flat_keys(cfg.get(cfg["template"]) or {}), flat_keys(source.get(source["template"]) or {})
    for key in sorted(set(mine) | set(theirs)):
        if key.split(".")[-1] in WORDING_KEYS or key in WORDING_KEYS:
            continue
        if mine.get(key) != theirs.get(key):
            raise ValueError(f"{where}: {cfg['template']}.{key} is {theirs.get(key)!r} there but {mine.get(key)!r} "
                             "here: use the source run's template settings (only the text may differ)")


def check_backbone_shape(model, source_metrics: Dict, run_dir: str) -> None:
    """Same hidden and vocabulary size as the source run recorded (a re-used model name can hide another model)."""
    shape = source_metrics.get("backbone_shape")
    if not shape:
        return
    conf = model.plm.config
    here = {"hidden_size": conf.hidden_size, "vocab_size": conf.vocab_size}
    for key, value in here.items():
        if shape.get(key) is not None and int(shape[key]) != int(value):
            raise ValueError(f"init_from '{run_dir}': its backbone has {key} {shape[key]} but this one has {value}: "
                             "start from a run of the same backbone")


def init_from_run(model, cfg: Dict, labels: Sequence[str], log=print, run_command: str = RUN_COMMAND) -> Dict:
    """Load the source run's prompt (and, when allowed and the labels match, head) into ``model``.
    Returns what was loaded (it goes into metrics.json)."""
    run_dir = str(cfg["init_from"]).replace("{seed}", str(cfg["seed"]))  # each seed from its own stage-1 run
    if (cfg.get("peer") or {}).get("method") or _peer_of(run_dir, run_command):
        return _init_peer(model, cfg, labels, run_dir, log, run_command)
    source = read_source(run_dir, run_command=run_command)
    metrics_path = os.path.join(run_dir, "metrics.json")
    source_metrics = {}
    if os.path.isfile(metrics_path):
        source_metrics = read_json(metrics_path, f"train the run '{run_dir}' again ({run_command} ... --overwrite)")
    check_compatible(cfg, source, run_dir, source_metrics)
    check_backbone_shape(model, source_metrics, run_dir)
    weights = os.path.join(run_dir, "template", "template.safetensors")
    fix = f"train init_from's run '{run_dir}' again ({run_command} ... --overwrite)"
    try:
        if hasattr(model.template, "check_saved_with"):  # our templates (openprompt/templates/persistence.py)
            model.template.check_saved_with(os.path.dirname(weights), model.plm)
        state, rows = _vocab_rows_by_id(model.template, read_safetensors(weights, fix), os.path.dirname(weights), fix)
        state, fresh, unused = _template_state(model.template, state, run_dir, fix)
        load_state(model.template, state, weights, fix)
    except ValueError as e:
        raise ValueError(e if str(e).startswith("init_from") else f"init_from '{run_dir}': {e}") from None
    info = {"run": run_dir, "template_tensors": len(state),
            "head": _load_head(model, cfg, source, labels, run_dir, run_command)}
    if rows:  # train.vocab_rows: seen keeps each run's own ids: said, and kept in metrics.json
        info["vocab_rows"] = {key: len(ids) for key, ids in rows.items()}
        words = model.template.tokenizer.convert_ids_to_tokens(rows["fresh"][:4])
        log(f"init_from: vocabulary table: {len(rows['copied'])} token rows copied by id from {run_dir}; "
            f"{len(rows['fresh'])} fresh (ids this run's table keeps and that run's lacks"
            + (f": {listed(words, 3)}" if words else "") + f"); {len(rows['not_used'])} of that run's not used "
            "(train.vocab_rows: seen keeps the ids of each run's own training text)")
    started = ""
    if fresh or unused:  # the {"soft"} tokens of another text: said, and kept in metrics.json
        info["fresh"], info["not_used"] = fresh, unused
        started = (f"; fresh (this text's {{\"soft\"}} tokens, not that run's): {', '.join(fresh) or 'none'}"
                   + (f"; not used (that run's {{\"soft\"}} tokens): {', '.join(unused)}" if unused else ""))
    log(f"init_from: prompt weights ({len(state)} tensors) from {run_dir}{started}; head: {info['head']}")
    return info


def _vocab_rows_by_id(template, state: Dict, directory: str, fix: str):
    """``(state, rows)``: the source's vocabulary tables (Random / Pretrained IPT) laid out as this run's. A table
    keeps a row per id of its run's own training text under ``train.vocab_rows: seen`` (or every id), so the two
    runs' rows mean other tokens: they are matched by token id (``generators.vocab_table.table_rows_by_id``).
    ``rows`` ({"copied", "fresh", "not_used"}: token ids) is empty when both tables keep the same ids."""
    from ..generators.vocab_table import VocabPromptTable, table_rows_by_id

    tables = {f"{n}.embedding.weight": m for n, m in template.named_modules() if isinstance(m, VocabPromptTable)}
    tables = {n: t for n, t in tables.items() if n in state}
    if not tables:
        return state, {}
    kept = _saved_vocab_rows(read_json(os.path.join(directory, "template_config.json"), fix))
    state, rows = dict(state), {}
    for name, table in tables.items():
        if kept == table.rows:  # the same layout: loaded as it is
            continue
        try:
            state[name], *ids = table_rows_by_id(table, state[name], kept)
        except ValueError as e:
            raise ValueError(f"its template/{name}: {e}; {fix}") from None
        rows = dict(zip(("copied", "fresh", "not_used"), ids))
    return state, rows


def _saved_vocab_rows(config) -> Optional[List[int]]:
    """The ids a saved template's vocabulary table keeps (``vocab_rows`` of its template_config.json, at the top
    or in a generator's section); None: every id."""
    if not isinstance(config, dict):
        return None
    if config.get("vocab_rows") is not None:
        return sorted({int(i) for i in config["vocab_rows"]})
    for value in config.values():
        found = _saved_vocab_rows(value)
        if found is not None:
            return found
    return None


def _template_state(template, state: Dict, run_dir: str, fix: str):
    """``(state, fresh, unused)``: what of the source's template weights this run starts from. Every tensor this
    run's template trains must be there (one left out would train from a fresh start without a word), but the
    ``{"soft"}`` token table, which belongs to the text and the text may differ: where this run's has another
    number of soft tokens (or the source's text had none), this run's starts fresh (``fresh``) and the source's
    is left (``unused``)."""
    own = dict(template.named_parameters())
    fresh = sorted(n for n in own if n.startswith(TEXT_TENSORS) and own[n].requires_grad
                   and (n not in state or state[n].shape != own[n].shape))
    unused = sorted(n for n in state if n.startswith(TEXT_TENSORS) and n in own
                    and (n in fresh or (not own[n].requires_grad and state[n].shape != own[n].shape)))
    state = {n: v for n, v in state.items() if n not in unused}
    missing = [n for n, p in own.items() if p.requires_grad and n not in state and n not in fresh
               and not n.startswith(HOST_TENSORS)]
    if missing:
        raise ValueError(f"init_from '{run_dir}': its template/template.safetensors lacks {len(missing)} tensor(s) "
                         f"this run's prompt trains ({listed(missing)}): they would train from a fresh start, not from "
                         f"that run (saved by another release, or edited); {fix}")
    return state, fresh, unused


def _peer_of(run_dir: str, run_command: str = RUN_COMMAND) -> Dict:
    """The ``peer:`` section of the run in ``run_dir`` (Adapter, Compacter, LoRA), or {}."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        return {}
    peer = read_json(path, f"train the run '{run_dir}' again ({run_command} ... --overwrite)").get("peer")
    return peer if isinstance(peer, dict) else {}


def _init_peer(model, cfg: Dict, labels: Sequence[str], run_dir: str, log, run_command: str = RUN_COMMAND) -> Dict:
    """A peer run from a peer run of the same method and options: the library's modules (``template.peer.*``
    of its ``best.safetensors``; a peer run has no ``template/``) and, as for every run, the head."""
    best = os.path.join(run_dir, "best.safetensors")
    source = read_source(run_dir, best, run_command)
    mine, theirs = cfg.get("peer") or None, source.get("peer") or None
    if mine != theirs:
        raise ValueError(f"init_from '{run_dir}' trained peer {theirs!r} but this run has peer {mine!r}: start "
                         "from a run of the same peer method and options")
    metrics_path = os.path.join(run_dir, "metrics.json")
    source_metrics = (read_json(metrics_path, f"train the run '{run_dir}' again ({run_command} ... --overwrite)")
                      if os.path.isfile(metrics_path) else {})
    check_compatible(cfg, source, run_dir, source_metrics)
    check_backbone_shape(model, source_metrics, run_dir)
    fix = f"train init_from's run '{run_dir}' again ({run_command} ... --overwrite)"
    state = {k[len("template."):]: v for k, v in read_safetensors(best, fix).items() if k.startswith("template.")}
    params = dict(model.template.named_parameters())
    if set(state) != set(params) or any(params[k].shape != v.shape for k, v in state.items()):
        raise ValueError(f"init_from '{run_dir}': its {mine['method']} weights do not fit this model's: {fix}")
    for name, value in state.items():
        params[name].data.copy_(value)
    info = {"run": run_dir, "template_tensors": len(state),
            "head": _load_head(model, cfg, source, labels, run_dir, run_command)}
    log(f"init_from: {mine['method']} weights ({len(state)} tensors) from {run_dir}; head: {info['head']}")
    return info


def _source_labels(source: Dict) -> List[str]:
    from ..data import get_task

    return list(get_task(source["dataset"]["name"], source["dataset"]).labels)  # your own data: its section


def _load_head(model, cfg: Dict, source: Dict, labels: Sequence[str], run_dir: str,
               run_command: str = RUN_COMMAND) -> str:
    mode = cfg.get("init_head", "auto")
    if mode is False:
        return "not loaded (init_head: false)"
    theirs, mine = _source_labels(source), list(labels)
    same = (theirs == mine and source["verbalizer"] == cfg["verbalizer"]
            and (source.get(source["verbalizer"]) or {}) == (cfg.get(cfg["verbalizer"]) or {}))
    best = os.path.join(run_dir, "best.safetensors")
    reason = None
    if not same:
        reason = f"label sets differ ({theirs} there, {mine} here, or another verbalizer / label words)"
    elif not os.path.isfile(best):
        reason = "the source run kept no best.safetensors"
    if reason:
        if mode is True:
            raise ValueError(f"init_head: true but init_from '{run_dir}' has no usable head: {reason}")
        return f"not loaded: {reason}"
    fix = f"train init_from's run '{run_dir}' again ({run_command} ... --overwrite), or set init_head: false"
    state = {k[len("verbalizer."):]: v for k, v in read_safetensors(best, fix).items() if k.startswith("verbalizer.")}
    params = dict(model.verbalizer.named_parameters())
    for name, value in state.items():
        if name not in params or params[name].shape != value.shape:
            raise ValueError(f"init_from '{run_dir}': head weight {name} does not fit this verbalizer")
    missing = [n for n, p in params.items() if p.requires_grad and n not in state]
    if missing:  # a head half from that run, half fresh, said to be loaded
        raise ValueError(f"init_from '{run_dir}': its best.safetensors lacks {len(missing)} head tensor(s) this run's "
                         f"verbalizer trains (verbalizer.{listed(missing)}): {fix}")
    for name, value in state.items():
        params[name].data.copy_(value)
    return f"loaded ({len(state)} tensors, labels {mine})"
