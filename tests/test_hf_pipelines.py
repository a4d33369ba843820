"""🤗 ``transformers.pipeline(...)`` over a wrapped model: each result equals the model's own forward on the same
text alone (batched and padded by the pipeline or not), for text classification (label words included), fill-mask,
token classification and feature extraction, on tiny BERT and RoBERTa."""
import copy
import os

import pytest
import torch

from test_hf_trainer import CASES, NEGATIVE, POSITIVE, classifier_from
from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

pytestmark = pytest.mark.usefixtures("one_thread")

# one method per way a prompt enters the model: before the text, kv prefixes, spliced (S-IDPG), every layer, late
BY_INJECTION = ["ipt-random", "p_tuning_v2-kv", "s_idpg-dnn-cls", "m_idpg-phm-cls", "lpt-appg"]
TEXTS = POSITIVE[:3] + NEGATIVE[:3] + ["good", "the film was great and good and she said it was great music"]


def _wrap(base, case, tok, **extra):
    torch.manual_seed(7)
    return get_instance_prompt_model(copy.deepcopy(base), InstancePromptConfig(**CASES[case], **extra), tok).eval()


def _alone(model, tok, texts, **kw):
    """The model's own logits, one text per forward (no padding), on the model's device: on a machine with a GPU,
    ``pipeline(...)`` without ``device`` moves the model there (transformers 5), so these tests ran CPU inputs into
    a GPU model."""
    with torch.no_grad():
        return [model(**tok(t, return_tensors="pt", **kw).to(model.device)).logits[0].cpu() for t in texts]


def _scores(rows, k):
    return torch.tensor([[{d["label"]: d["score"] for d in r}[f"LABEL_{i}"] for i in range(k)] for r in rows])


@pytest.mark.parametrize("case", BY_INJECTION)
def test_text_classification_batched_equals_each_text_alone(plm, case):
    from transformers import pipeline

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tok)
    pipe = pipeline("text-classification", model=model, tokenizer=tok, device="cpu")
    alone = torch.stack(_alone(model, tok, TEXTS))
    torch.testing.assert_close(_scores(pipe(TEXTS, top_k=None, batch_size=4), 2), alone.softmax(-1), rtol=0, atol=1e-5)
    torch.testing.assert_close(_scores(pipe(TEXTS, top_k=None, function_to_apply="none"), 2), alone, rtol=0, atol=1e-5)
    pair = pipe({"text": TEXTS[0], "text_pair": TEXTS[3]}, top_k=None)
    torch.testing.assert_close(_scores([pair], 2)[0], _alone(model, tok, [TEXTS[0]], text_pair=TEXTS[3])[0].softmax(-1),
                               rtol=0, atol=1e-5)


def test_text_classification_over_a_key_dataset_and_truncated_to_the_room_left(plm):
    """A KeyDataset streams through the pipeline as a list does; a text longer than the model's positions
    truncates under ``truncation=True, max_length=<room the prompt leaves>`` (the plain ``truncation=True`` cuts at
    the tokenizer's limit, which leaves no room for the prompt: one line naming the max_length)."""
    from datasets import Dataset
    from transformers import pipeline
    from transformers.pipelines.pt_utils import KeyDataset

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "ipt-random", tok)  # 5 positions before the text
    pipe = pipeline("text-classification", model=model, tokenizer=tok)
    rows = list(pipe(KeyDataset(Dataset.from_dict({"text": TEXTS}), "text"), batch_size=4, top_k=None))
    torch.testing.assert_close(_scores(rows, 2), torch.stack(_alone(model, tok, TEXTS)).softmax(-1), rtol=0, atol=1e-5)
    long = " ".join(["the movie was great"] * 60)
    with pytest.raises(ValueError, match=r"5 prompt tokens \+ 128 input tokens exceed the model's 128 positions: set "
                                         r"max_seq_length <= 123 \(the tokenizer's max_length"):
        pipe(long, truncation=True)
    got = pipe(long, truncation=True, max_length=123, top_k=None)
    torch.testing.assert_close(_scores([got], 2)[0],
                               _alone(model, tok, [long], truncation=True, max_length=123)[0].softmax(-1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_text_classification_of_label_words_names_every_class(plm, case, tmp_path):
    """A masked LM read through 3 classes of label words: the pipeline labels every class (the masked LM's config
    said 2 labels: top_k=None, or a text whose best class is the third, was ``KeyError: 2``), and the folder it saves
    loads back, in one call and onto a fresh masked LM with the default 2 labels."""
    from transformers import pipeline

    mlm, tok = plm
    words = [["bad"], ["good"], ["great"]]
    model = _wrap(mlm, case, tok, label_words=words)
    texts = [f"{t} it was {tok.mask_token} ." for t in TEXTS]
    alone = torch.stack(_alone(model, tok, texts))
    rows = pipeline("text-classification", model=model, tokenizer=tok, top_k=None)(texts)
    torch.testing.assert_close(_scores(rows, 3), alone.softmax(-1), rtol=0, atol=1e-5)
    assert model.config.num_labels == 3 and mlm.config.num_labels == 2  # (the fixture's masked LM was copied)

    model.save_pretrained(str(tmp_path / "saved"))
    loaded = InstancePromptModel.from_pretrained(copy.deepcopy(mlm), str(tmp_path / "saved"), tok)
    torch.testing.assert_close(torch.stack(_alone(loaded, tok, texts)), alone, rtol=0, atol=1e-6)


def test_label_words_keep_the_callers_class_names(plm):
    """An id2label with one name per class (``from_pretrained(path, id2label=...)``) names the pipeline's labels."""
    from transformers import pipeline

    mlm, tok = plm
    base = copy.deepcopy(mlm)
    base.config.id2label, base.config.label2id = {0: "negative", 1: "positive"}, {"negative": 0, "positive": 1}
    model = _wrap(base, "p_tuning_v2-kv", tok, label_words=[["bad"], ["good"]])
    row = pipeline("text-classification", model=model, tokenizer=tok)(f"good it was {tok.mask_token}", top_k=None)
    assert sorted(d["label"] for d in row) == ["negative", "positive"]


@pytest.mark.parametrize("case", BY_INJECTION)
def test_fill_mask_scores_at_the_real_mask(plm, case):
    from transformers import pipeline

    mlm, tok = plm
    model = _wrap(mlm, case, tok)
    texts = [f"the movie was {tok.mask_token} .", f"a {tok.mask_token} film", f"she said it was {tok.mask_token} music"]
    pipe = pipeline("fill-mask", model=model, tokenizer=tok, top_k=5)
    for text, rows, logits in zip(texts, pipe(texts, batch_size=3), _alone(model, tok, texts)):
        at_mask = logits[tok(text)["input_ids"].index(tok.mask_token_id)].softmax(-1)
        top = at_mask.topk(5)
        assert [d["token"] for d in rows] == top.indices.tolist()
        torch.testing.assert_close(torch.tensor([d["score"] for d in rows]), top.values, rtol=0, atol=1e-5)
        targeted = pipe(text, targets=["good", "bad"])
        torch.testing.assert_close(torch.tensor([d["score"] for d in targeted]),
                                   at_mask[[d["token"] for d in targeted]], rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", BY_INJECTION)
def test_token_classification_and_feature_extraction_at_the_callers_tokens(plm, case):
    from transformers import AutoModel, AutoModelForTokenClassification, pipeline

    mlm, tok = plm
    cfg = copy.deepcopy(mlm.config)
    cfg.num_labels, cfg.initializer_range = 3, 0.2
    torch.manual_seed(3)
    tagger = _wrap(AutoModelForTokenClassification.from_config(cfg), case, tok)
    text = TEXTS[-1]
    alone = _alone(tagger, tok, [text])[0].softmax(-1)
    pipe = pipeline("token-classification", model=tagger, tokenizer=tok)
    rows = pipe(text)
    assert [d["index"] for d in rows] == list(range(1, alone.size(0) - 1))  # every token but [CLS] / [SEP]
    for d in rows:
        assert d["entity"] == f"LABEL_{int(alone[d['index']].argmax())}"
        assert abs(d["score"] - float(alone[d["index"]].max())) < 1e-5
        assert text[d["start"]:d["end"]].lower() == d["word"].lstrip("\u0120").removeprefix("##")
    batched = pipe([TEXTS[0], text], batch_size=2)[1]  # padded beside a shorter text
    assert [{**d, "score": None} for d in batched] == [{**d, "score": None} for d in rows]
    torch.testing.assert_close(torch.tensor([d["score"] for d in batched]), torch.tensor([d["score"] for d in rows]),
                               rtol=0, atol=1e-5)
    grouped = pipe(text, aggregation_strategy="simple")
    assert "".join(text[g["start"]:g["end"]] for g in grouped).replace(" ", "") == text.replace(" ", "")

    torch.manual_seed(3)
    encoder = _wrap(AutoModel.from_config(cfg), case, tok)
    features = torch.tensor(pipeline("feature-extraction", model=encoder, tokenizer=tok)(text))
    with torch.no_grad():
        expected = encoder(**tok(text, return_tensors="pt").to(encoder.device)).last_hidden_state.cpu()
    torch.testing.assert_close(features, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "s_idpg-dnn-cls"])
def test_a_long_text_in_token_classification_names_the_pipelines_knob(plm, case):
    """The token-classification pipeline always truncates at the tokenizer's model_max_length (it has no max_length
    argument), which leaves no room for a prompt's positions: the line names ``tokenizer.model_max_length`` (it
    named only OpenPrompt's max_seq_length and the tokenizer's max_length), and following it works."""
    from transformers import AutoModelForTokenClassification, pipeline

    mlm, tok = plm
    cfg = copy.deepcopy(mlm.config)
    cfg.num_labels, cfg.initializer_range = 3, 0.2
    torch.manual_seed(3)
    tagger = _wrap(AutoModelForTokenClassification.from_config(cfg), case, tok)
    room = 128 - (5 if case == "ipt-random" else 3)
    long = " ".join(["the movie was great"] * 60)
    with pytest.raises(ValueError, match=rf"in a pipeline, tokenizer.model_max_length = {room}\)"):
        pipeline("token-classification", model=tagger, tokenizer=tok)(long)
    short = copy.deepcopy(tok)
    short.model_max_length = room
    rows = pipeline("token-classification", model=tagger, tokenizer=short)(long)
    alone = _alone(tagger, tok, [long], truncation=True, max_length=room)[0].softmax(-1)
    assert [d["index"] for d in rows] == list(range(1, room - 1))
    torch.testing.assert_close(torch.tensor([d["score"] for d in rows]), alone[1:room - 1].max(-1).values,
                               rtol=0, atol=1e-5)


def test_pipeline_from_a_loaded_folder(plm, tmp_path):
    """``InstancePromptModel.from_pretrained(dir)`` into ``pipeline(task, model=model, tokenizer=tok)`` predicts with
    the trained prompt; the folder's path as ``model=`` is transformers' own refusal (the folder holds no base
    config), never the base alone without the prompt."""
    from transformers import AutoModelForSequenceClassification, pipeline

    mlm, tok = plm
    base_dir = str(tmp_path / "base")
    classifier_from(mlm, initializer_range=0.2).save_pretrained(base_dir)
    tok.save_pretrained(base_dir)
    model = _wrap(AutoModelForSequenceClassification.from_pretrained(base_dir), "m_idpg-phm-cls", tok)
    with torch.no_grad():
        for p in (p for p in model.parameters() if p.requires_grad):
            p.add_(torch.randn_like(p) * 0.5)  # a prompt that changes the predictions
    model.save_pretrained(str(tmp_path / "out"))
    loaded = InstancePromptModel.from_pretrained(str(tmp_path / "out"))
    rows = pipeline("text-classification", model=loaded, tokenizer=tok, top_k=None)(TEXTS)
    torch.testing.assert_close(_scores(rows, 2), torch.stack(_alone(model, tok, TEXTS)).softmax(-1), rtol=0, atol=1e-5)
    assert not os.path.exists(str(tmp_path / "out" / "config.json"))
    with pytest.raises((ValueError, OSError)):
        pipeline("text-classification", model=str(tmp_path / "out"), tokenizer=tok)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_fill_mask_on_label_words_inside_vocabulary_logits(plm, case):
    """``fill-mask`` on a masked LM read through label words indexed its class logits as tokens (``IndexError: too
    many indices for tensor of dimension 2``). Inside ``with model.vocabulary_logits():`` the pipeline scores every
    token at the mask with the prompt in place: the class logits outside are the label words' logits inside."""
    from transformers import pipeline

    mlm, tok = plm
    words = [["bad"], ["good"], ["great"]]
    model = _wrap(mlm, case, tok, label_words=words)
    texts = [f"the movie was {tok.mask_token} .", f"a {tok.mask_token} film"]
    classes = torch.stack(_alone(model, tok, texts))
    pipe = pipeline("fill-mask", model=model, tokenizer=tok, top_k=5)
    with model.vocabulary_logits():
        vocabulary = _alone(model, tok, texts)
        rows = pipe(texts)
    ids = [tok.convert_tokens_to_ids(tok.tokenize(" " + w[0]))[0] for w in words]
    for text, got, logits, class_logits in zip(texts, rows, vocabulary, classes):
        at_mask = logits[tok(text)["input_ids"].index(tok.mask_token_id)]
        torch.testing.assert_close(at_mask[ids], class_logits, rtol=0, atol=1e-5)  # the prompt in place
        top = at_mask.softmax(-1).topk(5)
        assert [d["token"] for d in got] == top.indices.tolist()
        torch.testing.assert_close(torch.tensor([d["score"] for d in got]), top.values, rtol=0, atol=1e-5)
    torch.testing.assert_close(torch.stack(_alone(model, tok, texts)), classes, rtol=0, atol=0)  # classes again after
    classifier = _wrap(classifier_from(mlm), case, tok)
    with pytest.raises(ValueError, match=r"^vocabulary_logits\(\): BertForSequenceClassification has no vocabulary "
                                         r"head|^vocabulary_logits\(\): RobertaForSequenceClassification has no"):
        with classifier.vocabulary_logits():
            pass


@pytest.mark.parametrize("problem_type,k", [("multi_label_classification", 3), ("regression", 1)])
def test_pipeline_scores_and_trainer_predict_agree_with_the_logits(plm, problem_type, k, tmp_path):
    """The pipeline's default function (sigmoid for multi-label, none for regression), each ``function_to_apply`` under
    ``top_k=None``, and ``Trainer.predict``'s predictions (padded batches of 4) are the model's logits on each text."""
    from datasets import Dataset
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, pipeline

    mlm, tok = plm
    base = classifier_from(mlm, num_labels=k, initializer_range=0.2)
    base.config.problem_type = problem_type
    model = _wrap(base, "m_idpg-phm-cls", tok)
    logits = torch.stack(_alone(model, tok, TEXTS))
    pipe = pipeline("text-classification", model=model, tokenizer=tok)
    import transformers

    # transformers 4 applies sigmoid to any one-label model, 5 nothing to a regression
    sigmoid = problem_type == "multi_label_classification" or int(transformers.__version__.split(".")[0]) < 5
    torch.testing.assert_close(_scores(pipe(TEXTS, top_k=None, batch_size=4), k),
                               logits.sigmoid() if sigmoid else logits, rtol=0, atol=1e-5)
    for name, function in (("sigmoid", torch.sigmoid), ("softmax", lambda x: x.softmax(-1)), ("none", lambda x: x)):
        torch.testing.assert_close(_scores(pipe(TEXTS, top_k=None, function_to_apply=name), k), function(logits),
                                   rtol=0, atol=1e-5)
    rows = Dataset.from_dict({"text": TEXTS}).map(lambda r: tok(r["text"]), batched=True).remove_columns(["text"])
    trainer = Trainer(model=model, data_collator=DataCollatorWithPadding(tok),
                      args=TrainingArguments(output_dir=str(tmp_path / "out"), report_to="none",
                                             per_device_eval_batch_size=4, use_cpu=True))
    torch.testing.assert_close(torch.from_numpy(trainer.predict(rows).predictions), logits, rtol=0, atol=1e-5)
