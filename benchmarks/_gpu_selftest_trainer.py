"""One rank of the GPU self-test's Trainer step (`benchmarks/gpu_selftest.py`).

Run under torchrun, one rank per GPU: builds everything in memory (nothing is downloaded):
- a BPE tokenizer trained with `tokenizers` on random protein-like sequences;
- a tiny BertForMaskedLM from a BertConfig;
- a Trainer on CUDA (NCCL when there are several ranks), with ddpdoctor's DoctorCallback;
then calls `ddpdoctor.preflight(trainer=...)` just before `trainer.train()`, exactly as a user would,
and trains a few steps. Each rank writes OUT_DIR/preflight-rank<N>.json:
    {"rank", "device", "preflight": <report>, "steps": <DoctorCallback's step report or null>,
     "train": {"steps", "seconds", "loss"}, "log": [lines preflight logged]}

`--device cpu` runs the same code on the CPU with Gloo, to try the script where there is no GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


def corpus(count: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [" ".join(rng.choice(AMINO_ACIDS) * rng.randint(1, 3) for _ in range(rng.randint(20, 60)))
            for _ in range(count)]


def build_tokenizer(texts: list):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=200, special_tokens=special, show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    opts = ap.parse_args(argv)

    import torch
    from transformers import (BertConfig, BertForMaskedLM, DataCollatorForLanguageModeling, Trainer,
                              TrainingArguments)

    import ddpdoctor
    from ddpdoctor.integrations import DoctorCallback

    rank = int(os.environ.get("RANK", "0"))
    out_path = os.path.join(opts.out_dir, f"preflight-rank{rank}.json")
    if opts.device == "cuda" and not torch.cuda.is_available():
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump({"rank": rank, "error": f"torch {torch.__version__} sees no CUDA device"}, fh)
        return 3

    torch.manual_seed(0)
    texts = corpus(512)
    tokenizer = build_tokenizer(texts)
    encoded = tokenizer(texts, truncation=True, max_length=64)
    dataset = [{"input_ids": ids} for ids in encoded["input_ids"]]
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=128, max_position_embeddings=128))
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="ddpdoctor-selftest-"), max_steps=opts.steps,
                             per_device_train_batch_size=16, report_to=[], save_strategy="no", logging_steps=5,
                             disable_tqdm=True, dataloader_num_workers=0, ddp_find_unused_parameters=False,
                             use_cpu=opts.device == "cpu")
    callback = DoctorCallback(steps=max(4, opts.steps - 2), log=False)
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15),
                      callbacks=[callback])
    callback.trainer = trainer

    logged: list = []
    report = ddpdoctor.preflight(trainer=trainer, log=logged.append)
    start = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - start
    steps = getattr(callback, "steps_report", None)
    doc = {"rank": rank, "device": str(args.device), "torch": torch.__version__,
           "cuda": getattr(torch.version, "cuda", None),
           "preflight": report.to_dict(), "steps": steps.to_dict() if steps is not None else None,
           "train": {"steps": result.global_step, "seconds": round(seconds, 3), "loss": result.training_loss},
           "log": logged}
    try:
        from ddpdoctor.model.redact import redact_tree  # the same filter as every ddpdoctor output
    except ImportError:  # pragma: no cover - a layout without it
        redact_tree = None
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(redact_tree(doc) if redact_tree else doc, fh, indent=2, default=str)
    if str(args.device).split(":")[0] != opts.device:
        return 4  # the Trainer chose another device than asked: the self-test must say so
    return 0


if __name__ == "__main__":
    sys.exit(main())
