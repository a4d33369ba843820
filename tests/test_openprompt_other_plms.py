"""Our templates on PLMs other than BERT / RoBERTa, through OpenPrompt's pipeline: each method works or refuses
in one line. ELECTRA-small's shape (word embeddings narrower than the layers: embedding_size < hidden_size) and
T5 (encoder-decoder: the prompt enters the encoder, the mask is read from the decoder's positions)."""
import pytest
import torch
from openprompt import PromptDataLoader, PromptForClassification
from openprompt.data_utils import InputExample
from openprompt.plms.mlm import MLMTokenizerWrapper
from openprompt.prompts import ManualVerbalizer, SoftTemplate

from helpers import clone
from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

TEXT = '{"placeholder":"text_a"} it was {"mask"} .'
DATA = [InputExample(guid="0", text_a="the movie was great", label=0),
        InputExample(guid="1", text_a="a dog ran fast on the mat", label=1)]


def _electra_small_shaped(tokenizer):
    """ELECTRA-small's proportions: 16-d word embeddings projected up to 32-d layers (128 -> 256 in the real one)."""
    from transformers import ElectraConfig, ElectraForMaskedLM

    torch.manual_seed(0)
    return ElectraForMaskedLM(ElectraConfig(vocab_size=len(tokenizer), embedding_size=16, hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                            max_position_embeddings=128, pad_token_id=0)).eval()


def _batch(template, tokenizer):
    loader = PromptDataLoader(dataset=DATA, template=template, tokenizer=tokenizer,
                              tokenizer_wrapper_class=MLMTokenizerWrapper, max_seq_length=24, batch_size=2)
    return next(iter(loader))


@pytest.mark.parametrize("kwargs", [
    dict(generator="prefix", injection="kv"),                                    # Prefix Tuning / P-tuning v2
    dict(generator="ipt_random", injection="kv"),                                # Prefix + IPT
    dict(generator="idpg", injection="kv", idpg=dict(hidden=8, phm_n=4)),        # M-IDPG on keys / values
    dict(generator="lpt", injection="late", late_layer=1),                       # LPT
    dict(generator="idpg", injection="input", idpg=dict(depth="single", hidden=8, phm_n=4)),  # S-IDPG
], ids=["prefix-kv", "ipt-kv", "m_idpg-kv", "lpt-late", "s_idpg-input"])
def test_generated_prefix_trains_on_an_electra_small_shaped_model(bert, kwargs):
    _, tokenizer = bert
    plm = _electra_small_shaped(tokenizer)
    template = GeneratedPrefixTemplate(plm, tokenizer, text=TEXT, prompt_length=3, **kwargs)
    model = PromptForClassification(plm, template, ManualVerbalizer(tokenizer, num_classes=2, label_words=[["good"], ["bad"]]),
                                    freeze_plm=True)
    batch = _batch(template, tokenizer)
    logits = model(clone(batch))
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, batch["label"]).backward()
    grads = [p.grad for p in template.generator.parameters() if p.requires_grad]
    assert grads and all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)


def test_hidden_injection_on_narrow_embeddings_refuses_in_one_line(bert):
    _, tokenizer = bert
    plm = _electra_small_shaped(tokenizer)
    with pytest.raises(ValueError) as e:
        GeneratedPrefixTemplate(plm, tokenizer, text=TEXT, generator="idpg", injection="hidden", prompt_length=3,
                                idpg=dict(hidden=8, phm_n=4))
    message = str(e.value)
    assert len(message.splitlines()) == 1 and "16-d" in message and "32-d" in message and "injection: kv" in message


def _t5(tokenizer):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                               num_heads=4, decoder_start_token_id=0, pad_token_id=0)).eval()


def _t5_batch(template, tokenizer):
    """The encoder's side from PromptDataLoader; the decoder's side as OpenPrompt's T5 wrapper lays it out for
    classification (start token, then the mask read at decoder position 1), padded to 8 positions: longer
    than the prompt, so logits cut by the prompt's length would still have a position 1 to read."""
    batch = _batch(template, tokenizer)
    b = batch["input_ids"].size(0)
    batch["decoder_input_ids"] = torch.zeros(b, 8, dtype=torch.long)
    batch["decoder_input_ids"][:, 1] = tokenizer.mask_token_id
    batch["loss_ids"] = torch.zeros(b, 8, dtype=torch.long)
    batch["loss_ids"][:, 1] = 1
    return batch


def _assert_equals_soft_template(plm, tokenizer, text, make_batch):
    """InstanceWiseTemplate (task prompt only) and OpenPrompt's SoftTemplate given the same vectors: equal logits."""
    ours = InstanceWiseTemplate(plm, tokenizer, text=text, strategy="none", task_prompt_length=3)
    batch = make_batch(ours, tokenizer)
    vectors = ours.prompt_vectors(clone(batch))[0].detach().clone()
    theirs = SoftTemplate(plm, tokenizer, text=text, soft_embeds=torch.nn.Parameter(vectors))
    logits = []
    for template in (ours, theirs):
        verbalizer = ManualVerbalizer(tokenizer, num_classes=2, label_words=[["good"], ["bad"]])
        model = PromptForClassification(plm, template, verbalizer, freeze_plm=True).eval()
        with torch.no_grad():
            logits.append(model(clone(batch)))
    torch.testing.assert_close(logits[0], logits[1])


def test_instance_wise_on_t5_reads_the_decoders_mask_as_openprompts_soft_template(bert):
    _, tokenizer = bert
    plm = _t5(tokenizer)
    _assert_equals_soft_template(plm, tokenizer, TEXT, _t5_batch)


def _gpt2(tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=64)).eval()


@pytest.mark.parametrize("host", ["t5", "gpt2"])
def test_generated_prefix_refuses_a_model_without_a_masked_lm_encoder_in_one_line(bert, host):
    """On GPT-2 "before text_a" spliced the prompt after the first word (no leading special token) and IDPG's M(x)
    read a causal first token; only injection: input got past the layout check, and it ran."""
    _, tokenizer = bert
    plm = _t5(tokenizer) if host == "t5" else _gpt2(tokenizer)
    with pytest.raises(ValueError) as e:
        GeneratedPrefixTemplate(plm, tokenizer, text=TEXT, generator="idpg", injection="input", prompt_length=3,
                                idpg=dict(depth="single", hidden=8, phm_n=4))
    message = str(e.value)
    kind = "encoder-decoder" if host == "t5" else "decoder-only"
    assert len(message.splitlines()) == 1 and f"{kind} '{host}'" in message and "InstanceWiseTemplate" in message


def test_instance_wise_on_gpt2_equals_openprompts_soft_template(bert):
    """A decoder-only host keeps InstanceWiseTemplate: its prompt goes before the whole input, as SoftTemplate's."""
    _, tokenizer = bert
    plm = _gpt2(tokenizer)
    text = '{"placeholder":"text_a"} it was {"mask"}'  # a causal LM reads the mask at the end
    _assert_equals_soft_template(plm, tokenizer, text, _batch)
