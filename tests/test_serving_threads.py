"""Serving from threads: a web server's sync endpoints (FastAPI / Starlette, gradio, Flask threaded) call one model
object from several threads at once, and PyTorch releases the GIL inside its ops, so two forwards interleave. Every
method of both doors keeps each forward's prompt apart: thread A is stopped at a layer of its forward (after its
prompt was armed, before the layers read it) until thread B has run its whole forward on another batch; each
thread's logits are those of its batch run alone. A short random stress (no forced order) checks the same."""
import random
import threading

import pytest
import torch

from helpers import examples
from openprompt_ipt.data import encode_examples, make_loader
from openprompt_ipt.injection.layout import find_layout
from openprompt_ipt.runner.experiment import build_model
from test_hf_trainer import CASES, classifier_from, config_for
from test_openprompt_native import IDPG, MAX_LEN, backbones, resolve, runner_config  # noqa: F401 (fixture)
from test_openprompt_native import VARIANTS as NATIVE

pytestmark = pytest.mark.usefixtures("one_thread")
ATOL = 1e-5
TEXTS_A = ["the movie was great", "a good film", "terrible movie", "bad film"]
TEXTS_B = ["she said it was a truly wonderful and good film", "bad cat", "great music is art"]
# and IDPG with its default cache of M(x) (the conformance variants turn it off)
VARIANTS = {**NATIVE,
            "m_idpg_phm_cached": ("generated_prefix", dict(generator="idpg", prompt_length=3,
                                                           idpg=dict(IDPG, depth="multi", cache=True))),
            "s_idpg_dnn_cached": ("generated_prefix", dict(generator="idpg", prompt_length=3,
                                                           idpg=dict(IDPG, depth="single", layer="dnn", cache=True)))}
WAIT = 30  # seconds; only reached when a thread is stuck (the test then fails, it never passes on time)


def hf_model(bert, case, tmp_path):
    from openprompt_ipt.hf import get_instance_prompt_model

    mlm, tok = bert
    torch.manual_seed(2)
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), config_for(case, tmp_path, mlm),
                                      tokenizer=tok).eval()
    batches = [dict(tok(texts, padding=True, return_tensors="pt")) for texts in (TEXTS_A, TEXTS_B)]
    return model, model.base_model, (lambda batch: model(**batch).logits), batches


def openprompt_model(backbones, variant):  # noqa: F811
    model_path, table = backbones["bert"]
    template_name, section = VARIANTS[variant]
    exs = examples(7)
    torch.manual_seed(1)
    model, tokenizer, wrapper_class = build_model(runner_config(model_path, template_name, resolve(section, table),
                                                                "soft_verbalizer"), exs, 2, ["yes", "no"])
    wrapper = wrapper_class(max_seq_length=MAX_LEN, tokenizer=tokenizer, truncate_method="balanced")
    feats = encode_examples(exs, model.template, wrapper)
    batches = [next(iter(make_loader(part, len(part), tokenizer.pad_token_id))) for part in (feats[:4], feats[4:])]
    return model.eval(), model.plm, (lambda batch: model(dict(batch))), batches


class StopAt:
    """A pre-hook on every layer (and self-attention) of the PLM: the ``at``-th such call of thread A's forward waits
    there until thread B has run its whole forward (calls of IDPG's prompt-free M(x) pass count too)."""

    def __init__(self, plm):
        layout = find_layout(plm)
        # the blocks, and their self-attentions: a checkpointed block's recompute runs its forward, not its hooks
        self.layers = list(layout.layers) + list(layout.attentions)
        self.a, self.at, self.calls = None, None, 0
        self.reached, self.b_done = threading.Event(), threading.Event()
        # outside dynamo's trace (a compiled model): it would guard on the counts, and compile again at every stop
        hook = torch.compiler.disable(self._hook)
        self.handles = [layer.register_forward_pre_hook(hook, prepend=True) for layer in self.layers]

    def _hook(self, module, args):
        if threading.get_ident() != self.a:
            return None
        self.calls += 1
        if self.calls == self.at:
            self.reached.set()
            assert self.b_done.wait(WAIT), "thread B never finished its forward"
        return None

    def remove(self):
        for h in self.handles:
            h.remove()


def run_threads(*jobs, grad=False):
    """Each job in its own thread (under no_grad unless ``grad``: grad mode is per thread); their results, or the
    first error."""
    results, errors = [None] * len(jobs), []

    def run(i, job):
        try:
            with torch.set_grad_enabled(grad):
                results[i] = job()
        except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 2)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    if errors:
        raise errors[0]
    return results


def check_interleaved(model, plm, forward, batches, stops=None, grad=False):
    """At every layer call of A's forward (or the ``stops``-th ones), B's whole forward runs in between: each gets
    its own logits. ``grad``: ``forward`` is a training step (a checkpointed layer's recompute in the backward counts
    as a layer call too)."""
    stop = StopAt(plm)  # first: a compiled model compiles once, with the stop's hooks
    try:
        with torch.set_grad_enabled(grad):
            alone = [forward(b) for b in batches]
        stop.a, stop.at = threading.get_ident(), 0  # count A's layer calls: the places where B may come in
        with torch.set_grad_enabled(grad):
            forward(batches[0])
        points = stop.calls
        assert points >= 2
        for at in stops or range(1, points + 1):
            stop.at, stop.calls = at, 0
            stop.reached.clear()
            stop.b_done.clear()

            def a():
                stop.a = threading.get_ident()
                return forward(batches[0])

            def b():
                assert stop.reached.wait(WAIT), "thread A never reached its stop"
                try:
                    return forward(batches[1])
                finally:
                    stop.b_done.set()
            got_a, got_b = run_threads(a, b, grad=grad)
            torch.testing.assert_close(got_b, alone[1], rtol=0, atol=ATOL, msg=lambda m: f"B, A stopped at {at}: {m}")
            torch.testing.assert_close(got_a, alone[0], rtol=0, atol=ATOL, msg=lambda m: f"A, stopped at {at}: {m}")
    finally:
        stop.remove()
    # a forward after the threads (nothing left armed) gives its logits too
    with torch.set_grad_enabled(grad):
        torch.testing.assert_close(forward(batches[0]), alone[0], rtol=0, atol=ATOL)


def check_stress(forward, batches, trials=12, threads=4):
    """No forced order: ``threads`` threads each forward a random batch, ``trials`` times."""
    with torch.no_grad():
        alone = [forward(b) for b in batches]
    rng = random.Random(0)
    for _ in range(trials):
        picks = [rng.randrange(len(batches)) for _ in range(threads)]
        got = run_threads(*[(lambda i=i: forward(batches[i])) for i in picks])
        for i, logits in zip(picks, got):
            torch.testing.assert_close(logits, alone[i], rtol=0, atol=ATOL)


@pytest.mark.parametrize("case", list(CASES))
def test_hf_door_two_threads_on_one_model_each_get_their_own_logits(bert, case, tmp_path):
    check_interleaved(*hf_model(bert, case, tmp_path))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_openprompt_door_two_threads_on_one_model_each_get_their_own_logits(backbones, variant):  # noqa: F811
    check_interleaved(*openprompt_model(backbones, variant))


@pytest.mark.parametrize("case", ["p_tuning_v2-hidden", "m_idpg-phm-cls", "lpt-npg", "s_idpg-dnn-cls"])
def test_hf_door_random_thread_stress(bert, case, tmp_path):
    _, _, forward, batches = hf_model(bert, case, tmp_path)
    check_stress(forward, batches)


@pytest.mark.parametrize("variant", ["m_idpg_phm_hidden", "s_idpg_phm_input", "late_ipt_random"])
def test_openprompt_door_random_thread_stress(backbones, variant):  # noqa: F811
    _, _, forward, batches = openprompt_model(backbones, variant)
    check_stress(forward, batches)


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "lpt-npg"])
def test_hf_door_compiled_model_from_two_threads(bert, case, tmp_path):
    """torch.compile(model) (what the trace refusal recommends for serving) from two threads: dynamo runs the hooks
    that read each thread's plan, and each thread gets its own logits."""
    import logging

    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # its graph-break notes
    model, plm, _, (batch, _) = hf_model(bert, case, tmp_path)
    batches = [batch, {k: v.flip(0) for k, v in batch.items()}]  # B: A's rows reversed (one shape, one compile)
    compiled = torch.compile(model, backend="eager")
    check_interleaved(model, plm, lambda batch: compiled(**batch).logits, batches, stops=[2])  # A stopped at layer 1


CHECKPOINTED = ["prefix_tuning", "p_tuning_v2-hidden", "m_idpg-phm-cls", "lpt-appg"]


def checkpointed(model):
    """Training mode (the base checkpoints its layers only there), every dropout at 0: steps repeat exactly."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def checkpointed_step(model, batch):
    """One training step's gradients of the prompt (the base checkpoints its layers; dropout off, so it repeats)."""
    model.zero_grad(set_to_none=True)
    out = model(**batch, labels=torch.tensor([0, 1, 0, 1][: batch["input_ids"].size(0)]))
    out.loss.backward()
    return torch.cat([p.grad.flatten() for n, p in model.named_parameters() if n.startswith("generator.")
                      and p.grad is not None])


@pytest.mark.parametrize("case", CHECKPOINTED)
def test_hf_door_checkpointed_forward_in_one_thread_backward_in_another(bert, case, tmp_path):
    """Gradient checkpointing's recompute runs in whichever thread runs the backward (autograd's device thread on a
    GPU): it arms there the plan its forward ran with, so the gradients are those of a step in one thread."""
    model, _, _, (batch, _) = hf_model(bert, case, tmp_path)
    checkpointed(model)
    reference = checkpointed_step(model, batch)
    assert reference.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    labels = torch.tensor([0, 1, 0, 1])
    (out,) = run_threads(lambda: model(**batch, labels=labels), grad=True)
    recomputed = []
    handles = [layer.register_forward_pre_hook(lambda *a: recomputed.append(threading.get_ident()))
               for layer in find_layout(model.base_model).attentions]
    out.loss.backward()  # here, in the test's thread: the recompute too
    for h in handles:
        h.remove()
    assert recomputed and set(recomputed) == {threading.get_ident()}
    got = torch.cat([p.grad.flatten() for n, p in model.named_parameters() if n.startswith("generator.")
                     and p.grad is not None])
    torch.testing.assert_close(got, reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", CHECKPOINTED)
def test_hf_door_checkpointed_recompute_while_another_thread_forwards(bert, case, tmp_path):
    """Thread A's training step is stopped at each layer call, its backward's recomputes included, while thread B runs
    a whole forward on another batch: A's gradients are those of its step alone (B's plan never reaches A's
    recompute, A's never B's layers)."""
    model, plm, forward, batches = hf_model(bert, case, tmp_path)
    checkpointed(model)
    steps = {id(batches[0]): lambda: checkpointed_step(model, batches[0])}

    def step_or_forward(batch):
        # A trains (its gradients), B only forwards (no backward: the .grad fields are A's)
        return steps[id(batch)]() if id(batch) in steps else forward(batch).detach()
    check_interleaved(model, plm, step_or_forward, batches, grad=True)


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "lpt-npg"])
def test_a_copy_or_pickle_of_a_model_served_from_threads_predicts_as_it(bert, case, tmp_path):
    """The per-thread state is not copied (a ``threading.local`` cannot be): ``copy.deepcopy`` and pickling (``torch.save``
    of the whole model) give a model with the same logits, also after forwards in other threads."""
    import copy
    import pickle

    model, _, forward, batches = hf_model(bert, case, tmp_path)
    run_threads(*[(lambda b=b: forward(b)) for b in batches])
    with torch.no_grad():
        expected = forward(batches[0])
        for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
            torch.testing.assert_close(twin(**batches[0]).logits, expected, rtol=0, atol=ATOL)


def test_switches_of_one_thread_leave_the_other_threads_forwards_alone(bert, tmp_path):
    """``with model.vocabulary_logits():`` (a fill-mask endpoint) and ``with model.disable_adapter():`` switched the model
    for every thread while the block ran: a classification endpoint's call then got vocabulary logits, or the base's
    logits without the prompt. They switch the forwards of the thread that entered the block."""
    import copy
    import dataclasses

    from openprompt_ipt.hf import get_instance_prompt_model

    mlm, tok = bert
    config = dataclasses.replace(config_for("p_tuning_v2-kv", tmp_path, mlm), label_words=[["bad"], ["good"]])
    model = get_instance_prompt_model(copy.deepcopy(mlm), config, tokenizer=tok).eval()
    batch = dict(tok([f"the movie was {tok.mask_token} .", f"a {tok.mask_token} film"], padding=True,
                     return_tensors="pt"))
    with torch.no_grad():
        classes = model(**batch).logits
        with model.disable_adapter():
            plain = model(**batch).logits
    assert classes.shape == (2, 2) and not torch.allclose(plain, classes, atol=1e-4)
    for switch, inside in ((model.vocabulary_logits, None), (model.disable_adapter, plain)):
        with switch():
            (other,) = run_threads(lambda: model(**batch).logits)
            with torch.no_grad():
                here = model(**batch).logits
        torch.testing.assert_close(other, classes, rtol=0, atol=ATOL)  # the other thread: class logits, prompted
        if inside is None:
            assert here.dim() == 3  # this thread: the vocabulary logits
        else:
            torch.testing.assert_close(here, inside, rtol=0, atol=ATOL)


def test_disable_adapter_still_reaches_data_parallel_copies(bert, tmp_path):
    """nn.DataParallel (allowed for Prompt Tuning) runs each copy's forward in a thread of its own: the copies take
    the switch the calling thread has on (torch's ``replicate`` copies each module by ``_replicate_for_data_parallel``,
    in the calling thread)."""
    model, _, forward, (batch, _) = hf_model(bert, "prompt_tuning", tmp_path)

    def copy_of(model):
        replica = model._replicate_for_data_parallel()
        replica._parameters = dict(model._parameters)  # replicate's next step: the parameters, on the copy's device
        return replica
    with torch.no_grad():
        prompted = forward(batch)
        with model.disable_adapter():
            plain = forward(batch)
            replica = copy_of(model)
        (got,) = run_threads(lambda: replica(**batch).logits)  # the block has ended: the copy keeps its switch
        (fresh,) = run_threads(lambda: copy_of(model)(**batch).logits)
    assert not torch.allclose(plain, prompted, atol=1e-4)
    torch.testing.assert_close(got, plain, rtol=0, atol=ATOL)
    torch.testing.assert_close(fresh, prompted, rtol=0, atol=ATOL)


def test_idpg_cache_of_one_thread_under_autocast_never_serves_another_threads_fp32_forward(bert, tmp_path):
    """IDPG's cache of M(x) is emptied when the PLM's weights or the autocast dtype change. Thread A (under bf16
    autocast) was stopped in its M(x) pass while thread B (fp32) emptied the cache and filled it; A then put its
    bf16-made M(x) into B's fp32 cache, and every later fp32 forward of those texts read it (logits off by ~1e-2,
    without a word). A's rows now go to the cache of A's own stamp."""
    model, plm, forward, (batch, _) = hf_model(bert, "m_idpg-phm-cls", tmp_path)
    with torch.no_grad():
        alone = forward(batch)
    model.generator.sentence.cache.clear()
    stop = StopAt(plm)
    try:
        stop.at = 1  # A's first layer call: its M(x) pass, after its look into the cache

        def a():
            stop.a = threading.get_ident()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return forward(batch)

        def b():
            assert stop.reached.wait(WAIT), "thread A never reached its stop"
            try:
                return forward(batch)
            finally:
                stop.b_done.set()
        _, got_b = run_threads(a, b)
    finally:
        stop.remove()
    torch.testing.assert_close(got_b, alone, rtol=0, atol=ATOL)
    with torch.no_grad():
        torch.testing.assert_close(forward(batch), alone, rtol=0, atol=ATOL)  # fp32 again: fp32-made M(x)
