"""Our metric functions against the official definitions, written out here independently: SuperGLUE's (CB
accuracy + macro-F1, MultiRC F1a over all answers + EM per paragraph-question, as 🤗 evaluate's ``super_glue``)
and GLUE's (MRPC / QQP accuracy + F1 of the positive class, STS-B Pearson + Spearman, as ``glue``), on seeded
random predictions and the edge cases: constant predictions, a class never predicted, questions whose answers
are all false, the positive class's index in each task's label order, and the groups ``evaluate`` builds."""
import random

import numpy as np
import pytest
import torch
from openprompt.data_utils import InputExample
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score

from openprompt_ipt.data import TASKS
from openprompt_ipt.data.tasks import multirc_answers
from openprompt_ipt.training.metrics import answer_metrics, binary_metrics, classification_metrics, regression_metrics


def official_multirc(paragraphs, questions, preds, labels):
    """evaluate's super_glue ``evaluate_multirc``: EM per f'{paragraph}-{question}', F1a = binary F1 over answers."""
    by_question = {}
    for p, q, pred, label in zip(paragraphs, questions, preds, labels):
        by_question.setdefault(f"{p}-{q}", []).append(pred == label)
    em = sum(all(v) for v in by_question.values()) / len(by_question)
    return {"em": em, "f1a": float(f1_score(labels, preds))}


def random_case(rng, n_classes):
    n = rng.randint(1, 30)
    labels = [rng.randrange(n_classes) for _ in range(n)]
    preds = [rng.randrange(n_classes) for _ in range(n)]
    edge = rng.random()
    if edge < 0.15:
        preds = [0] * n  # a constant predictor: the positive class never predicted
    elif edge < 0.25:
        labels = [0] * n  # no positive in the split
    elif edge < 0.3:
        preds = list(labels)
    return labels, preds


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_classification_and_binary_metrics_are_the_official_ones():
    rng = random.Random(0)
    for _ in range(400):
        n_classes = rng.choice([2, 3])
        labels, preds = random_case(rng, n_classes)
        ours = classification_metrics(labels, preds)
        accuracy = float(np.mean(np.array(labels) == np.array(preds)))
        assert ours["accuracy"] == pytest.approx(accuracy, abs=1e-12)
        # super_glue cb: f1_score(average="macro") over the classes in labels or predictions
        assert ours["macro_f1"] == pytest.approx(f1_score(labels, preds, average="macro", zero_division=0), abs=1e-12)
        if n_classes == 2:  # glue mrpc / qqp: f1_score(y_true, y_pred), pos_label 1
            ours = binary_metrics(labels, preds)
            f1 = f1_score(labels, preds, zero_division=0)
            assert ours["f1"] == pytest.approx(f1, abs=1e-12)
            assert ours["acc_and_f1"] == pytest.approx((accuracy + f1) / 2, abs=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_multirc_f1a_and_em_are_the_official_ones():
    rng = random.Random(1)
    for _ in range(400):
        labels, preds = random_case(rng, 2)
        # few paragraphs and questions: many answers per question, and question ids repeated across paragraphs
        paragraphs = [rng.randrange(4) for _ in labels]
        questions = [rng.randrange(3) for _ in labels]
        groups = [f"{p}-{q}" for p, q in zip(paragraphs, questions)]
        ours = answer_metrics(labels, preds, groups)
        official = official_multirc(paragraphs, questions, preds, labels)
        assert ours["f1a"] == pytest.approx(official["f1a"], abs=1e-12)
        assert ours["em"] == pytest.approx(official["em"], abs=1e-12)
    # a question whose answers are all false counts for EM when every answer is predicted false
    assert answer_metrics([0, 0, 1, 0], [0, 0, 1, 1], ["a", "a", "b", "b"]) == {"f1a": pytest.approx(2 / 3), "em": 0.5}


def test_regression_metrics_are_scipys_pearson_and_spearman():
    rng = random.Random(2)
    for _ in range(200):
        n = rng.randint(3, 30)
        labels = [rng.choice([0.0, 0.2, 0.4, 0.6, 1.0]) for _ in range(n)]  # STS-B-like ties
        preds = [rng.random() if rng.random() < 0.8 else 0.5 for _ in range(n)]
        if len(set(labels)) < 2 or len(set(preds)) < 2:
            continue  # undefined there (scipy: nan); ours is 0.0, pinned in test_glue_regression.py
        ours = regression_metrics(labels, preds)
        assert ours["pearson"] == pytest.approx(pearsonr(labels, preds)[0], abs=1e-9)
        assert ours["spearman"] == pytest.approx(spearmanr(labels, preds)[0], abs=1e-9)
        assert ours["pearson_spearman"] == pytest.approx((ours["pearson"] + ours["spearman"]) / 2)


@pytest.mark.parametrize("task,positive,raw_positive", [
    ("mrpc", "equivalent", "1"),  # MRPC tsv 'Quality' 1 = paraphrase; hub glue/mrpc label 1 = equivalent
    ("qqp", "duplicate", "1"),    # QQP 'is_duplicate' 1; hub glue/qqp label 1 = duplicate
    ("multirc", "True", 1),       # MultiRC answer label 1 = a correct answer (F1a's positive class)
])
def test_the_positive_class_is_label_1_where_an_f1_of_class_1_is_reported(task, positive, raw_positive):
    t = TASKS[task]
    assert t.labels.index(positive) == 1
    assert [t.label_id(raw, 0, "row") for raw in (raw_positive, 1, positive)] == [1, 1, 1]


def test_multirc_groups_are_paragraph_and_question_so_question_ids_never_merge():
    """Question ids that restart in every paragraph (or hub ids) still give one group per question."""
    rows = [{"idx": p, "passage": {"text": f"paragraph {p}", "questions": [
        {"idx": q, "question": f"question {p} {q}", "answers": [{"idx": a, "text": f"a{a}", "label": a % 2}
                                                               for a in range(2)]} for q in range(2)]}}
            for p in range(3)]
    answers = [a for i, r in enumerate(rows) for a in multirc_answers(r, i)]
    groups = {meta["group"] for *_, meta in answers}
    assert len(groups) == 6 and len({guid for guid, *_ in answers}) == 12
    hub = {"idx": {"paragraph": 7, "question": 0, "answer": 3}, "paragraph": "p", "question": "q", "answer": "a",
           "label": 1}
    assert next(multirc_answers(hub, 0))[4]["group"] == "7-0"


class LengthParity(torch.nn.Module):
    """Predicts class 1 for an odd number of tokens: each example's prediction is known without the batch."""

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # evaluate reads the device from a parameter

    def forward(self, batch):
        odd = (batch["attention_mask"].sum(-1) % 2).float()
        return torch.stack([1 - odd, odd], dim=-1)


def test_evaluate_scores_each_answer_in_its_own_question():
    """``evaluate`` batches examples sorted by length; each group must stay with its own prediction and label."""
    from openprompt_ipt.data import make_loader
    from openprompt_ipt.training import evaluate

    rng = random.Random(3)
    feats, preds = [], []
    for q in range(12):
        for a in range(rng.randint(1, 4)):
            length = rng.randint(2, 12)
            ones = torch.ones(length, dtype=torch.long)
            feats.append({"input_ids": ones, "attention_mask": ones,
                          "label": torch.tensor(rng.randrange(2)), "guid": f"{q}-{a}", "group": f"{q // 3}-{q}"})
            preds.append(length % 2)
    labels = [int(f["label"]) for f in feats]
    expected = answer_metrics(labels, preds, [f["group"] for f in feats])
    assert 0 < expected["em"] < 1 and 0 < expected["f1a"] < 1  # a case where misplaced groups would show
    got = evaluate(LengthParity(), make_loader(feats, 5, 0, sort_by_length=True), show_progress=False)
    assert (got["f1a"], got["em"]) == pytest.approx((expected["f1a"], expected["em"]))
    assert got["accuracy"] == pytest.approx(np.mean(np.array(labels) == np.array(preds)))
