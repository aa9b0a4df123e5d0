"""One Trainer run for bench_preflight.py: tiny BERT-MLM, DDP over Gloo when run under torchrun.
Prints one JSON line (rank 0): the end time of every optimizer step."""
import json
import os
import sys
import tempfile
import time

import torch
from transformers import BertConfig, BertForMaskedLM, Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(5, 25, (32,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


class StepClock(TrainerCallback):
    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kw):
        self.ends.append(time.perf_counter())


def main():
    mode, steps = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=25, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=128, max_position_embeddings=64))
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=steps, per_device_train_batch_size=8,
                             gradient_accumulation_steps=2, report_to=[], save_strategy="no", logging_steps=10 ** 6,
                             use_cpu=True, disable_tqdm=True, ddp_find_unused_parameters=False)
    clock = StepClock()
    callbacks = [clock]
    doctor = None
    if mode == "doctor":
        from ddpdoctor.integrations import DoctorCallback

        class TimedDoctor(DoctorCallback):
            """Adds up the time spent inside the per-step events (not on_train_begin's preflight,
            not the one-off judgement after the measured steps)."""

            spent: list = []

            def _timed(self, name, *a, **k):
                t = time.perf_counter()
                finished_before = self._done
                getattr(super(), name)(*a, **k)
                if finished_before == self._done:  # the step that ran _finish is not a per-step cost
                    self.spent.append(time.perf_counter() - t)

            def on_step_begin(self, *a, **k):
                self._timed("on_step_begin", *a, **k)

            def on_substep_end(self, *a, **k):
                self._timed("on_substep_end", *a, **k)

            def on_pre_optimizer_step(self, *a, **k):
                self._timed("on_pre_optimizer_step", *a, **k)

            def on_step_end(self, *a, **k):
                self._timed("on_step_end", *a, **k)

        doctor = TimedDoctor(log=False)
        callbacks.insert(0, doctor)
    Trainer(model=model, args=args, train_dataset=DS(), callbacks=callbacks).train()
    if int(os.environ.get("RANK", "0")) == 0:
        spent_ms = sum(doctor.spent) * 1000 if doctor is not None else 0.0
        print("BENCH " + json.dumps({"mode": mode, "ends": clock.ends, "callback_ms": spent_ms}), flush=True)


if __name__ == "__main__":
    main()
