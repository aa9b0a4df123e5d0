"""DoctorCallback with an unmodified single-process Trainer: zero-argument use, in-process."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # a real Trainer run (about 20 s)


@pytest.mark.timeout(360)
def test_zero_argument_callback_with_an_unmodified_trainer(tmp_path):
    import torch
    from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

    from ddpdoctor.integrations import DoctorCallback

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(5, 25, (16,))
            return {"input_ids": ids, "labels": ids.clone()}

    model = BertForMaskedLM(BertConfig(vocab_size=25, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=32))
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, report_to=[], save_strategy="no", logging_steps=1000,
                             use_cpu=True, disable_tqdm=True)
    lines: list = []
    doctor = DoctorCallback(steps=4, log=lines.append)
    trainer = Trainer(model=model, args=args, train_dataset=DS(), callbacks=[doctor])
    trainer.train()

    assert doctor.trainer is trainer  # found from the call stack: no argument needed
    assert doctor.preflight_report is not None and doctor.preflight_report.command == "preflight"
    assert doctor.preflight_report.extra["preflight"]["when"] == "train_begin"
    assert doctor.steps_report is not None
    ranks = doctor.steps_report.extra["steps"]["ranks"]
    phases = ranks["0"]["phases_ms"]
    assert {"forward", "backward", "optimizer"} <= set(phases) and ranks["0"]["step_ms"] > 0
    assert not any(name in vars(trainer) for name in ("get_batch_samples", "training_step"))  # unwrapped
    assert doctor.recorder.unused_parameters == []  # BERT-MLM uses every parameter
    assert any("ddpdoctor" in line for line in lines)
