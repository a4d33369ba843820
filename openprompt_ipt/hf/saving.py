"""Saving and loading ``InstancePromptModel``: only what trains, with the prompt's config (``state_dict``, the
Trainer's checkpoints and resume, ``save_pretrained``, ``push_to_hub``, ``from_pretrained``), and the fingerprint of
the base a saved prompt must agree with."""
from __future__ import annotations

import json
import os
import tempfile
from contextvars import ContextVar
from typing import Optional

import torch
from torch import nn
from transformers.utils import SAFE_WEIGHTS_NAME, WEIGHTS_NAME

from ..generators import cannot_rebuild, check_exported_tables, exported_tables, exports_in_weights, rebuilding_saved
from ..serialization import read_json, read_safetensors, read_torch
from .config import InstancePromptConfig, default_late_layer
from .shared_base import warn_if_loading_changes_others
from .tokenizer_check import _load_tokenizer, check_against_record, recorded_path

# one format for save_pretrained and the Trainer (save_model, checkpoints): the state dict as model.safetensors,
# the prompt's config inside it as CONFIG_KEY (UTF-8 JSON bytes), so a folder the Trainer wrote loads too
WEIGHTS_FILE, CONFIG_KEY, FORMAT = SAFE_WEIGHTS_NAME, "instance_prompt_config", "openprompt_ipt.hf/2"
CONFIG_FILE = "instance_prompt_config.json"           # a readable copy of CONFIG_KEY (save_pretrained)
OLD_WEIGHTS_FILE = "instance_prompt.safetensors"      # format 1: weights + CONFIG_FILE, still read
READ_FORMATS = ("openprompt_ipt.hf/1", FORMAT)         # a later release's format is refused, not read as this one
TORCH_WEIGHTS_FILE = WEIGHTS_NAME  # what Trainer.save_model / checkpoints write with save_safetensors=False (< 5)
# what a saved prompt must agree on with the model it is loaded onto
FINGERPRINT = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
               "max_position_embeddings", "num_labels")


# set while from_pretrained rebuilds a saved model: the head it loads then replaces the base's on purpose
LOADING_SAVED: ContextVar[bool] = ContextVar("openprompt_ipt_hf_loading_saved", default=False)


def fingerprint(model: nn.Module) -> dict:
    cfg = model.config
    out = {key: getattr(cfg, key, None) for key in FINGERPRINT}
    out["architecture"] = type(model).__name__
    return out


def decode_config(tensor: torch.Tensor) -> dict:
    return json.loads(bytes(tensor.cpu().tolist()).decode("utf-8"))


class NonFiniteWeightsWarning(UserWarning):
    """Weights saved with NaN / inf values: training diverged."""


def warn_non_finite(state, directory: str) -> None:
    """The stock Trainer trains on through NaN (it logs such a step's loss as 0 and grad_norm nan) and saves what
    it has: a NaN prompt saved without a word predicts one class everywhere once loaded."""
    import warnings

    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        listed = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        warnings.warn(f"save_pretrained('{directory}'): {len(bad)} tensor(s) hold NaN / inf ({listed}): training "
                      "diverged (the Trainer logs grad_norm nan); lower the learning rate and train again",
                      NonFiniteWeightsWarning, stacklevel=3)


class SavingMixin:
    """Checkpoints hold the tensors that train and the prompt's config; the frozen base is never saved."""

    # ---- checkpoints: only what trains, with the prompt's config ------------------------------------------------
    def train(self, mode: bool = True):
        """``nn.Module.train``; a base weight the user unfroze is what a checkpoint holds from then on (the Trainer
        and training loops call it before their steps), so freezing the model for inference later cannot drop a
        trained layer from what ``save_pretrained`` writes."""
        if mode and "_trained_names" in self.__dict__:
            self._trained_names |= frozenset(n for n, p in self.named_parameters() if p.requires_grad)
        return super().train(mode)

    def saved_parameters(self) -> dict:
        """``{name: parameter}`` a checkpoint holds: what trains since the prompt was built (prompt, generator,
        head), base weights unfrozen since (requiring grad now or when the model was last put in training mode);
        a model frozen for inference (``requires_grad_(False)``, ``from_pretrained(..., is_trainable=False)``) still
        saves and loads them."""
        return {n: p for n, p in self.named_parameters() if n in self._trained_names or p.requires_grad}

    def saved_config(self) -> dict:
        """What a saved folder records: the prompt, the base (fingerprint, name or path) and the tokenizer."""
        base = dict(fingerprint(self.base_model),
                    name_or_path=recorded_path(getattr(self.config, "_name_or_path", "") or ""))
        return {"format": FORMAT, "prompt": self.prompt_config.to_dict(), "base_model": base,
                "tokenizer": self._tokenizer_record, "exported_tables": exported_tables(self),
                "exports_in_weights": exports_in_weights(self, self.saved_parameters())}

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Only the tensors that train (prompt, generator, head), as PEFT's checkpoints, and the prompt's config
        (``CONFIG_KEY``): the Trainer's checkpoints and ``save_model`` then hold what a run changed and what it
        was, and a masked LM's tied vocabulary head cannot stop their safetensors writer. The frozen weights are
        ``self.base_model.state_dict()``; ``load_state_dict`` reads either."""
        out = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        keep = {prefix + name for name in self.saved_parameters()}
        for key in [k for k in out if k.startswith(prefix) and k not in keep]:
            del out[key]
        out[prefix + CONFIG_KEY] = torch.tensor(list(json.dumps(self.saved_config()).encode("utf-8")),
                                                dtype=torch.uint8)
        return out

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """The config entry is checked and consumed here, so a wrapper's load (``module.`` prefix) reads it too."""
        saved = state_dict.pop(prefix + CONFIG_KEY, None)
        if saved is not None:
            prompt = decode_config(saved).get("prompt")
            if isinstance(prompt, dict) and prompt.get("late_layer", 0) is None and self.prompt_config.late_layer:
                # a late prompt saved before its default layer was written down: the default it was built with
                prompt["late_layer"] = default_late_layer(self.base_model)
            if prompt != json.loads(json.dumps(self.prompt_config.to_dict())):
                raise ValueError(f"the checkpoint holds a '{(prompt or {}).get('method')}' prompt of another config "
                                 f"than this model's ({self.prompt_config.method}): load it onto a model built with "
                                 "its config (InstancePromptModel.from_pretrained)")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Reads what ``state_dict`` wrote (the Trainer's resume and ``load_best_model_at_end``): the frozen base
        is not expected, a trainable tensor is; a checkpoint of another prompt config is one line."""
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        trainable = set(self.saved_parameters())
        missing = [k for k in result.missing_keys if k in trainable]
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(f"load_state_dict: missing trained tensors {missing[:5]}, unexpected "
                               f"{result.unexpected_keys[:5]}")
        return type(result)(missing, result.unexpected_keys)

    # ---- save / load ------------------------------------------------------------------------------
    def push_to_hub(self, repo_id: str, commit_message: str = "Upload instance prompt", private: Optional[bool] = None,
                    token=None, **_ignored):
        """Upload what ``save_pretrained`` writes (the trained tensors and the config, never the frozen base) to the
        hub repository ``repo_id``, created if missing, as PEFT's ``push_to_hub`` does; ``from_pretrained(repo_id)``
        reads it back where the hub is reachable."""
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        repo = api.create_repo(repo_id, private=private, exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder)
            return api.upload_folder(repo_id=getattr(repo, "repo_id", repo_id), folder_path=folder,
                                     commit_message=commit_message)

    def save_pretrained(self, save_directory: str, safe_serialization: bool = True, is_main_process: bool = True,
                        push_to_hub: bool = False, max_shard_size=None, **unread) -> None:
        """The folder ``Trainer.save_model`` writes: ``model.safetensors`` (only what trains, and the config as
        ``CONFIG_KEY``), plus ``instance_prompt_config.json``, a readable copy of the config; both appear at once.
        transformers' keywords that callers pass (a pipeline's save) hold as they are: the file is safetensors
        either way and far below any shard size; ``is_main_process=False`` (another rank) writes nothing. Others
        would be ignored, so they are refused."""
        from safetensors.torch import save_file

        if push_to_hub:
            raise ValueError("save_pretrained(push_to_hub=True): call model.push_to_hub(repo_id), which uploads what "
                             "save_pretrained writes")
        if unread:
            raise TypeError(f"save_pretrained does not read {sorted(unread)}: it writes only what trains, as "
                            "model.safetensors + instance_prompt_config.json; drop them")
        if not is_main_process:
            return
        refuse_a_models_folder(save_directory)
        self._check_vocabulary()  # a base resized since the prompt was built: a folder that would load nowhere

        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        warn_non_finite(state, save_directory)
        os.makedirs(save_directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=save_directory) as tmp:  # no half-written pair is ever visible
            save_file(state, os.path.join(tmp, WEIGHTS_FILE), metadata={"format": "pt"})
            with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
                json.dump(decode_config(state[CONFIG_KEY]), f, indent=2)
            for name in (WEIGHTS_FILE, CONFIG_FILE):
                os.replace(os.path.join(tmp, name), os.path.join(save_directory, name))

    @classmethod
    def from_pretrained(cls, model=None, directory: Optional[str] = None, tokenizer=None, method: Optional[str] = None,
                        is_trainable: bool = True, **base_kwargs):
        """``from_pretrained(dir)``: rebuild the base from the name or path recorded at save time (as PEFT's
        ``AutoPeftModelFor...``; ``base_kwargs`` go to its ``from_pretrained``), then the prompt, and load the
        weights. ``from_pretrained(base, dir, tokenizer)``: onto the base given. ``dir`` is what ``save_pretrained``
        or ``Trainer.save_model`` wrote; ``method`` (optional) is the method the caller expects it to hold.
        The model comes back in eval mode; ``is_trainable=False`` (PEFT's keyword) also freezes the prompt and head."""
        if directory is None and isinstance(model, (str, os.PathLike)):
            model, directory = None, model
        directory = os.fspath(directory)
        if model is not None and base_kwargs:  # they would build the base, which the caller already built
            raise ValueError(f"from_pretrained: {sorted(base_kwargs)} go to the base model's from_pretrained, but the "
                             f"base was given: load the base with them, or call "
                             f"InstancePromptModel.from_pretrained('{directory}', ...) to build it")
        saved, weights = _read_saved(directory)
        if not isinstance(saved, dict) or not isinstance(saved.get("prompt", {}), dict):
            raise ValueError(f"'{os.path.join(directory, CONFIG_FILE)}' holds a {type(saved).__name__}, not the JSON "
                             "object save_pretrained writes (its prompt config and base model): save the model again "
                             "with model.save_pretrained(directory)")
        if saved.get("format", FORMAT) not in READ_FORMATS:
            raise ValueError(f"'{directory}' was saved in format {saved['format']!r}, which this openprompt-ipt does "
                             f"not read (it reads {', '.join(READ_FORMATS)}): load it with the release that saved it "
                             "(pip install -U openprompt-ipt)")
        if weights is None:  # the readable config copied without its weights: no prompt to load, not an empty one
            raise FileNotFoundError(f"'{directory}' has {CONFIG_FILE} but no weights ({WEIGHTS_FILE}): copy the weights "
                                    "file too, or save the model again (model.save_pretrained(directory))")
        prompt = saved.get("prompt", {})
        if method is not None and prompt.get("method") != method:
            raise ValueError(f"'{directory}' holds a '{prompt.get('method')}' prompt, not '{method}': "
                             "load the directory saved for that method")
        if model is None:
            model = _load_base(saved.get("base_model", {}), directory, base_kwargs)
        mine = fingerprint(model)
        # a masked LM's num_labels is the label words' class count, set when the prompt is built (hf/model.py)
        unchecked = {"name_or_path"} | ({"num_labels"} if prompt.get("label_words") else set())
        for key, value in saved.get("base_model", {}).items():
            if key not in unchecked and mine.get(key) != value:
                # a base resized for added tokens before the prompt was built: the recorded base is not resized
                resized = (f" (resized after tokenizer.add_tokens: base.resize_token_embeddings({value}), then "
                           f"from_pretrained(base, '{directory}', tokenizer))"
                           if key == "vocab_size" and isinstance(value, int) and value > (mine.get(key) or 0) else "")
                raise ValueError(f"'{directory}' was saved for another base model ({key} {value!r}, this model has "
                                 f"{mine.get(key)!r}): load it onto the model it was trained on{resized}")
        if tokenizer is None:
            tokenizer = _saved_tokenizer(directory, saved.get("tokenizer") or {}, model)
        check_against_record(tokenizer, saved.get("tokenizer"), directory)
        as_it_was = cls.base_as_it_is(model)
        try:
            loading = LOADING_SAVED.set(True)
            try:
                with rebuilding_saved(saved.get("exports_in_weights")):  # what the weights hold is not read from exports
                    wrapped = cls(model, InstancePromptConfig.from_dict(prompt), tokenizer=tokenizer)
            finally:
                LOADING_SAVED.reset(loading)
        except FileNotFoundError as e:  # an export the weights do not hold (a frozen table), moved or deleted
            raise FileNotFoundError(cannot_rebuild(directory, e, "the model", "then load it again")) from None
        try:  # every name and shape checked before the first copy: a refused folder leaves the base as it was
            own, unfrozen = _check_weights(wrapped, weights, saved, directory)
            warn_if_loading_changes_others(wrapped, own, weights, directory)  # an error where warnings are errors
        except BaseException:
            wrapped.give_back_base(as_it_was)
            raise
        for name, tensor in weights.items():
            own[name].data.copy_(tensor)
        wrapped._trained_names |= frozenset(unfrozen)  # saved again, even once frozen for inference
        for name in unfrozen:
            own[name].requires_grad_(True)
        if not is_trainable:
            wrapped.requires_grad_(False)
        return wrapped.eval()  # ready to predict, as transformers' and PEFT's from_pretrained; the Trainer's train() trains


def refuse_a_models_folder(directory: str) -> None:
    """Our weights file has the name of a 🤗 model's (``model.safetensors``): saved into the folder of a model (its
    ``config.json``, or a ``model.safetensors`` of other weights: the base's folder, saving "in place" as after full
    fine-tuning), it replaced that model's weights with the prompt's, and the base then loaded as random weights
    (transformers logs a table of MISSING keys) under ``from_pretrained(dir)`` and ``pipeline(model=dir)``: the base
    lost, and wrong output."""
    fix = "save the prompt to a folder of its own (e.g. model.save_pretrained('out/'))"
    if os.path.isfile(os.path.join(directory, "config.json")):
        raise ValueError(f"save_pretrained('{directory}'): the folder holds a 🤗 model (config.json), whose "
                         f"{WEIGHTS_FILE} this would replace with only the prompt's tensors (the model would then load "
                         f"as random weights): {fix}")
    existing = os.path.join(directory, WEIGHTS_FILE)
    if os.path.isfile(existing):
        from safetensors import safe_open

        try:
            with safe_open(existing, "pt") as f:
                ours = CONFIG_KEY in f.keys()
        except Exception:  # unreadable (a cut write of ours, or not safetensors): replaced, as before
            ours = True
        if not ours:
            raise ValueError(f"save_pretrained('{directory}'): its {WEIGHTS_FILE} holds other weights (not an "
                             f"InstancePromptModel's), which this would replace: {fix}")


def _check_weights(wrapped, weights: dict, saved: dict, directory: str):
    """``(own, unfrozen)``: the parameters ``weights`` load into (names and shapes all checked, nothing copied yet)
    and the base weights among them the user had unfrozen."""
    check_exported_tables(wrapped, saved.get("exported_tables"), directory)
    own = wrapped.saved_parameters()
    # base weights the user unfroze and trained: saved as what required grad then, so loaded (and kept) as such
    base = {n for n, _ in wrapped.base_model.named_parameters(prefix="base_model")}
    unfrozen = sorted((set(weights) - set(own)) & base)
    own.update((n, p) for n, p in wrapped.named_parameters() if n in unfrozen)
    missing, unknown = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    if missing or unknown:
        raise ValueError(f"'{directory}' lacks {missing[:3]} / has unknown {unknown[:3]}: it was not saved from a "
                         f"'{saved.get('prompt', {}).get('method')}' prompt with this config")
    for name, tensor in weights.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"'{directory}': {name} is {tuple(tensor.shape)} but the prompt expects "
                             f"{tuple(own[name].shape)}")
    return own, unfrozen


def _read_saved(directory: str):
    """``(config, weights)`` of a saved folder: ``model.safetensors`` with the config inside (save_pretrained,
    Trainer.save_model, a Trainer checkpoint; ``pytorch_model.bin`` where it ran with save_safetensors=False), or
    format 1 (instance_prompt.safetensors + its JSON config); weights ``None``: the JSON config alone."""
    fix = "save the model again (model.save_pretrained(directory) or trainer.save_model(directory))"
    path = next((p for p in (os.path.join(directory, name) for name in (WEIGHTS_FILE, TORCH_WEIGHTS_FILE))
                 if os.path.isfile(p)), None)
    if path is not None:
        weights = (read_safetensors(path, fix) if path.endswith(".safetensors")
                   else read_torch(path, fix, weights_only=True))  # the Trainer's save_safetensors=False
        if CONFIG_KEY not in weights:
            raise ValueError(f"'{path}' holds no {CONFIG_KEY}: it was not written by an InstancePromptModel; {fix}")
        return decode_config(weights.pop(CONFIG_KEY)), weights
    if os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        saved = read_json(os.path.join(directory, CONFIG_FILE), fix)
        old = os.path.join(directory, OLD_WEIGHTS_FILE)
        return saved, (read_safetensors(old, fix) if os.path.isfile(old) else None)
    raise FileNotFoundError(f"'{directory}' has no {WEIGHTS_FILE}: {fix}")


def _load_base(base: dict, directory: str, kwargs: dict) -> nn.Module:
    """The base model a saved prompt records: its architecture from its name or path."""
    import transformers

    path, architecture = base.get("name_or_path"), base.get("architecture")
    if not path:
        raise ValueError(f"'{directory}' records no name or path of its base model (it was built from a config): "
                         f"pass the base, InstancePromptModel.from_pretrained(base_model, '{directory}', tokenizer)")
    if base.get("num_labels") is not None:
        kwargs = {"num_labels": base["num_labels"], **kwargs}
    model_class = getattr(transformers, architecture or "", None) or transformers.AutoModelForSequenceClassification
    try:
        return model_class.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ValueError(f"'{directory}' was trained on base model '{path}', which does not load ({reason}): pass the "
                         f"base, InstancePromptModel.from_pretrained(base_model, '{directory}', tokenizer)") from None


def _saved_tokenizer(directory: str, record: dict, model):
    """The tokenizer the Trainer saved beside the weights, else the one the config records, else the model's."""
    from transformers import AutoTokenizer

    for path in (directory, record.get("name_or_path")):
        if path and (path != directory or os.path.isfile(os.path.join(directory, "tokenizer_config.json"))):
            try:
                return AutoTokenizer.from_pretrained(path)
            except (OSError, ValueError):
                pass
    return _load_tokenizer(model)

