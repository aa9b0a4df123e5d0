"""The loss-scaling measurement DoctorCallback makes at the first step (ddpdoctor/inprocess/loss_scaling.py),
on real models: BertForMaskedLM's loss ignores num_items_in_batch, GPT-2's honours it."""
import types

import pytest

from ddpdoctor.inprocess import loss_scaling

# Imported by the fixture below when the first test of this file runs, not at collection: every collecting pytest
# process (each xdist worker) paid torch + transformers (~2-4 s CPU) for these 6 tests, which run in one of them.
torch = transformers = None


@pytest.fixture(autouse=True, scope="module")
def _torch_and_transformers():
    global torch, transformers
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")


def fake_trainer(processes=2, average=True, accepts=True):
    acc = types.SimpleNamespace(num_processes=processes, unwrap_model=lambda m: m)
    args = types.SimpleNamespace(average_tokens_across_devices=average, n_gpu=0)
    return types.SimpleNamespace(accelerator=acc, args=args, model_accepts_loss_kwargs=accepts, compute_loss_func=None,
                                 label_smoother=None, get_tp_size=lambda: 1)


def batch(vocab=50, n=4, length=16):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (n, length), generator=g)
    labels = ids.clone()
    labels[:, ::3] = -100
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def bert():
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                                                num_attention_heads=2, intermediate_size=64))


def gpt2():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=32, n_layer=1, n_head=2,
                                                                n_positions=32))


def test_bert_ignores_num_items_in_batch_and_trainer_doubles_it():
    model, inputs = bert(), batch()
    model.train()  # dropout on: the two passes must still see the same masks
    items = torch.tensor(int((inputs["labels"] != -100).sum()) * 2)  # two ranks' tokens
    returned = model(**inputs).loss * 2
    fact = loss_scaling.measure(fake_trainer(), model, inputs, items, returned)
    assert fact["checked"] and fact["ignores_num_items"] and fact["trainer_scale"] == 2, fact
    assert fact["trainer_loss"] == pytest.approx(2 * fact["model_loss"], rel=0.05)


def test_gpt2_honours_num_items_in_batch():
    model, inputs = gpt2(), batch()
    items = torch.tensor(int((inputs["labels"][:, 1:] != -100).sum()) * 2)
    fact = loss_scaling.measure(fake_trainer(), model, inputs, items, model(**inputs).loss)
    assert fact["checked"] and not fact["ignores_num_items"], fact


@pytest.mark.parametrize("kw,why", [({"processes": 1}, "one process"), ({"average": False}, "average_tokens"),
                                    ({"accepts": False}, "loss kwargs")])
def test_no_scaling_no_measurement(kw, why):
    fact = loss_scaling.measure(fake_trainer(**kw), bert(), batch(), torch.tensor(10), torch.tensor(1.0))
    assert not fact["checked"] and why in fact["skipped"]


def test_a_failing_model_never_raises():
    class Broken(torch.nn.Module):
        def forward(self, **kw):
            raise RuntimeError("boom")

    fact = loss_scaling.measure(fake_trainer(), Broken(), batch(), torch.tensor(10), torch.tensor(1.0))
    assert not fact["checked"] and "boom" in fact["skipped"]
