"""OpenPrompt's own T5 / GPT-2 pipeline through our shims (``openprompt/compat.py``), as its tutorials run it:
tutorial 2.1 (``PromptDataLoader`` with teacher forcing, ``PromptForGeneration``'s loss, a template-only optimizer
step, ``generate``) with T5's tokenizer wrappers and OpenPrompt's own templates, and tutorial 1.3
(``KnowledgeableVerbalizer`` from a file, calibrated). Tiny random models; on transformers 4 the shims do
nothing and the same tests pass."""
import pytest
import torch
import transformers
from openprompt import PromptDataLoader, PromptForClassification, PromptForGeneration
from openprompt.data_utils import InputExample
from openprompt.plms.lm import LMTokenizerWrapper
from openprompt.plms.mlm import MLMTokenizerWrapper
from openprompt.plms.seq2seq import T5LMTokenizerWrapper, T5TokenizerWrapper
from openprompt.prompts import (KnowledgeableVerbalizer, ManualTemplate, MixedTemplate, PrefixTuningTemplate,
                                SoftTemplate)

from conftest import _bert, _roberta, _t5_tokenizer
from openprompt_ipt import InstanceWiseTemplate

TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) >= 5
DATA = [InputExample(guid="0", text_a="the movie was great", tgt_text="good film", label=0),
        InputExample(guid="1", text_a="a dog ran fast on the mat", tgt_text="bad", label=1)]
# tutorial 2.1's generation_arguments, max_length cut to what a 64-position GPT-2 holds
TUTORIAL_GENERATION = dict(max_length=40, max_new_tokens=None, min_length=5, temperature=1.0, do_sample=False,
                           top_k=0, top_p=0.9, repetition_penalty=1.0, num_beams=5, bad_words_ids=None)


@pytest.fixture(scope="module")
def hosts(tiny_dir):
    """host name -> (a fresh tiny random model, its tokenizer): a template may rewire its PLM."""
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

    t5_tok, gpt2_tok = _t5_tokenizer(tiny_dir), _roberta(tiny_dir)[1]

    def t5():
        torch.manual_seed(0)
        return T5ForConditionalGeneration(T5Config(
            vocab_size=len(t5_tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, pad_token_id=0,
            decoder_start_token_id=0, eos_token_id=t5_tok.eos_token_id)).eval(), t5_tok

    def gpt2():
        torch.manual_seed(0)
        return GPT2LMHeadModel(GPT2Config(vocab_size=len(gpt2_tok), n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                          bos_token_id=gpt2_tok.bos_token_id,
                                          eos_token_id=gpt2_tok.eos_token_id)).eval(), gpt2_tok

    return {"t5": t5, "gpt2": gpt2}


def _template(kind, plm, tok):
    if kind == "manual":
        return ManualTemplate(tokenizer=tok, text='{"placeholder":"text_a"} it was {"mask"}')
    if kind == "mixed":
        return MixedTemplate(model=plm, tokenizer=tok, text='{"placeholder":"text_a"} {"soft": "it was"} {"mask"}')
    if kind == "soft":
        return SoftTemplate(model=plm, tokenizer=tok, text='{"placeholder":"text_a"} {"mask"}', num_tokens=3)
    return InstanceWiseTemplate(plm, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="random", prompt_length=3,
                                task_prompt_length=2)  # ours: a task prompt, then one computed from the input


def _batch(template, tok, wrapper, teacher_forcing):
    loader = PromptDataLoader(dataset=DATA, template=template, tokenizer=tok, tokenizer_wrapper_class=wrapper,
                              max_seq_length=32, decoder_max_length=8, batch_size=2, teacher_forcing=teacher_forcing,
                              predict_eos_token=True, truncate_method="head")
    return next(iter(loader))


@pytest.mark.parametrize("wrapper", [T5TokenizerWrapper, T5LMTokenizerWrapper])
def test_t5_wrappers_put_the_sentinel_then_the_target_in_the_decoder(hosts, wrapper):
    """transformers 5 renamed ``additional_special_tokens_ids`` (where the wrappers find ``<extra_id_0>``)."""
    _, tok = hosts["t5"]()
    batch = _batch(_template("manual", None, tok), tok, wrapper, teacher_forcing=True)
    target = tok.encode(" good film", add_special_tokens=False)
    expected = [tok.pad_token_id, tok.convert_tokens_to_ids("<extra_id_0>"), *target, tok.eos_token_id]
    assert batch["decoder_input_ids"][0, :len(expected)].tolist() == expected
    assert batch["loss_ids"][0, :len(expected)].tolist() == [0, 0] + [1] * (len(target) + 1)


def _forward_logits(model, inputs):
    """The next-token logits through OpenPrompt's training path (template + whole PLM forward, no cache)."""
    return model.prompt_model({k: v.clone() for k, v in inputs.items()}).logits[:, -1]


def _greedy_by_hand(model, batch, steps):
    """What ``generate`` must return for greedy search, one full forward per token (as OpenPrompt's generate lays
    it out: T5 batched from the decoder's mask position; GPT-2 one unpadded example at a time, prompt included)."""
    eos, pad = model.tokenizer.eos_token_id, model.tokenizer.pad_token_id
    if model.config.is_encoder_decoder:
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "soft_token_ids") if k in batch}
        decoder = batch["decoder_input_ids"][:, :int(batch["loss_ids"].argmax(-1)[0]) + 1]
        done = torch.zeros(len(decoder), dtype=torch.bool)
        for _ in range(steps):
            nxt = _forward_logits(model, {**inputs, "decoder_input_ids": decoder}).argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            decoder, done = torch.cat([decoder, nxt[:, None]], 1), done | (nxt == eos)
        return decoder.tolist()
    out = []
    for i, n in enumerate((batch["input_ids"] != pad).sum(-1).tolist()):
        row = {k: batch[k][i:i + 1, :n] for k in ("input_ids", "attention_mask", "soft_token_ids") if k in batch}
        for _ in range(steps):
            nxt = _forward_logits(model, row).argmax(-1)
            grown = {"input_ids": nxt[:, None]}  # a generated token: attended to, not a soft token
            row = {k: torch.cat([v, grown.get(k, torch.full_like(v[:, :1], k != "soft_token_ids"))], 1)
                   for k, v in row.items()}
            if nxt.item() == eos:
                break
        out.append(row["input_ids"][0].tolist())
    return out


@pytest.mark.parametrize("host,wrapper,kind", [
    ("t5", T5TokenizerWrapper, "manual"), ("t5", T5TokenizerWrapper, "mixed"), ("t5", T5LMTokenizerWrapper, "mixed"),
    ("gpt2", LMTokenizerWrapper, "manual"), ("gpt2", LMTokenizerWrapper, "soft"),
    ("t5", T5TokenizerWrapper, "instance_wise"), ("gpt2", LMTokenizerWrapper, "instance_wise"),
])
def test_tutorial_2_1_trains_and_generates_what_the_model_predicts(hosts, host, wrapper, kind):
    """On transformers 5, ``generate`` called PreTrainedModel methods PromptForGeneration lacks and skipped its
    encoder hook (the one that runs the template). Greedy output must equal the argmax of full forwards; the
    same weights gave the same loss, greedy and beam output on 4.39 and 5.24 (checked when this was written)."""
    plm, tok = hosts[host]()
    template = _template(kind, plm, tok)
    model = PromptForGeneration(plm=plm, template=template, freeze_plm=True, tokenizer=tok)
    params = [p for n, p in model.template.named_parameters() if "raw_embedding" not in n]  # tutorial 2.1's group
    loss = model(_batch(template, tok, wrapper, teacher_forcing=True))
    assert torch.isfinite(loss) and loss > 0
    if params:
        optimizer = torch.optim.AdamW(params, lr=1e-2)
        loss.backward()
        optimizer.step()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params if p.requires_grad)
    model.eval()
    with torch.no_grad():
        sequences, sentences = model.generate(_batch(template, tok, wrapper, False), max_new_tokens=4, num_beams=1,
                                              do_sample=False)
        assert sequences == _greedy_by_hand(model, _batch(template, tok, wrapper, False), 4)
        _, beamed = model.generate(_batch(template, tok, wrapper, False), **TUTORIAL_GENERATION)
    assert len(sentences) == len(beamed) == 2 and all(isinstance(s, str) for s in sentences + beamed)


@pytest.mark.skipif(not TRANSFORMERS_5, reason="transformers 4 reads PrefixTuningTemplate's tuple past_key_values")
@pytest.mark.parametrize("host", ["t5", "gpt2"])
def test_prefix_tuning_template_is_refused_in_one_line_on_transformers_5(hosts, host):
    """It passes 4.x tuple past_key_values: on 5.x GPT-2 computed other logits than on 4.39 (no error), T5 raised
    KeyError 'past_key_value' from the layers it had rewired."""
    plm, tok = hosts[host]()
    with pytest.raises(ValueError) as e:
        PrefixTuningTemplate(model=plm, tokenizer=tok, text='{"placeholder":"text_a"} {"mask"}', num_token=3)
    message = str(e.value)
    assert len(message.splitlines()) == 1 and "PrefixTuningTemplate" in message and "transformers<5" in message
    if host == "t5":  # refused before it replaced the layers' forward
        assert "forward" not in vars(plm.encoder.block[0].layer[0])


@pytest.mark.parametrize("make", [_bert, _roberta], ids=["bert", "roberta"])
def test_tutorial_1_3_knowledgeable_verbalizer_calibrates_and_trains(tiny_dir, tmp_path, make):
    """Tutorial 1.3's order: the label words come from a file after construction (OpenPrompt's constructor reads
    ``max_token_split`` before setting it, so ``label_words=`` fails on every transformers: docs/openprompt.md)."""
    from openprompt.utils.calibrate import calibrate

    plm, tok = make(tiny_dir)
    words = tmp_path / "knowledgeable_verbalizer.txt"
    words.write_text("good,great,yes\nbad,terrible,no\n")
    template = ManualTemplate(tokenizer=tok, text='{"placeholder":"text_a"} it was {"mask"} .')
    # candidate_frac=0: on a 60-word vocabulary the tutorial's 0.5 can drop every word of a class (OpenPrompt then
    # raises "max() arg is an empty sequence"); the calibration pass itself is what runs through our shims
    verbalizer = KnowledgeableVerbalizer(tok, num_classes=2, candidate_frac=0.0).from_file(str(words))
    model = PromptForClassification(plm=plm, template=template, verbalizer=verbalizer, freeze_plm=False)
    inputs = next(iter(PromptDataLoader(dataset=DATA, template=template, tokenizer=tok, max_seq_length=32,
                                        tokenizer_wrapper_class=MLMTokenizerWrapper, batch_size=2)))
    logits = model(inputs)
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, inputs["label"]).backward()
    assert verbalizer.label_words_weights.grad.abs().sum() > 0
    # then calibrated and evaluated as the tutorial does (a calibrated verbalizer does not train: OpenPrompt divides
    # its softmax output in place, so backward raises on every transformers; docs/openprompt.md)
    support = [InputExample(guid=str(i), text_a=e.text_a, label=-1) for i, e in enumerate(DATA)]
    loader = PromptDataLoader(dataset=support, template=template, tokenizer=tok, max_seq_length=32, batch_size=2,
                              tokenizer_wrapper_class=MLMTokenizerWrapper, truncate_method="tail")
    calibration = calibrate(model, loader)
    assert calibration.shape == (len(tok),) and torch.isfinite(calibration).all()
    model.verbalizer.register_calibrate_logits(calibration)
    assert verbalizer.label_words == [[" good", " great", " yes"], [" bad", " terrible", " no"]]
    with torch.no_grad():
        calibrated = model(inputs)
    assert torch.isfinite(calibrated).all() and not torch.allclose(calibrated, logits)
