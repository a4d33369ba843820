"""OpenPrompt's SoftVerbalizer logged "Label word for a class is a list, only use the first word." once per
class on every construction (the quick start's 11 topics: 11 lines), although each class had one word
(issue #32). Now: silent when it does not apply, one warning naming the classes when it does."""
import logging
import warnings

from openprompt.prompts import SoftVerbalizer, load_verbalizer
from yacs.config import CfgNode

from openprompt_ipt.openprompt.label_word_notice import OPENPROMPT_MESSAGE

TOPICS = [[w] for w in "the a an is was it not no yes maybe question".split()]  # 11 classes, one word each


def build(bert, label_words, caplog):
    model, tok = bert
    caplog.clear()
    with caplog.at_level(logging.INFO), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        verbalizer = SoftVerbalizer(tok, model, num_classes=len(label_words), label_words=label_words)
    notices = [r.getMessage() for r in caplog.records if "first word" in r.getMessage()]
    ours = [str(w.message) for w in seen if "first label word" in str(w.message)]
    return verbalizer, notices, ours


def test_one_word_per_class_says_nothing(bert, caplog):
    verbalizer, notices, ours = build(bert, TOPICS, caplog)
    assert notices == [] and ours == []
    assert verbalizer.head_last_layer.weight.shape[0] == 11  # the head is built as before


def test_several_words_in_a_class_is_said_once_and_named(bert, caplog):
    words = [["yes", "true"], ["no"], ["maybe", "neutral", "question"]]
    verbalizer, notices, ours = build(bert, words, caplog)
    assert notices == []
    assert ours == ["soft_verbalizer initialises each class from its first label word only; not used: "
                    "0: ['true']; 2: ['neutral', 'question']"]
    # the head row of class 0 still starts from "yes" (behaviour unchanged)
    _, tok = bert
    yes = tok.encode(" yes", add_special_tokens=False)
    assert verbalizer.label_words_ids[0].tolist() == yes
    assert verbalizer.head_last_layer.weight[0].tolist() == verbalizer.original_head_last_layer[yes[0]].tolist()


def test_by_name_through_load_verbalizer_too(bert, caplog):
    model, tok = bert
    node = CfgNode({"verbalizer": "soft_verbalizer", "soft_verbalizer": {"num_classes": 11, "label_words": TOPICS}},
                   new_allowed=True)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        load_verbalizer(node, model=model, tokenizer=tok)
    assert not [r for r in caplog.records if r.getMessage() == OPENPROMPT_MESSAGE]
