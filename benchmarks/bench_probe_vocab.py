"""How much compute and gradient the probe's model vocabulary adds: one rank's training step of the
probe's own workload (BertForMaskedLM, its tokenizer and collator, batch 8 x 64 tokens) at several
model vocabularies, interleaved round by round.

Measured as the process's CPU time per step (`time.process_time`, one torch thread), which shared
cores disturb far less than wall time, and the gradient bytes each step all-reduces under DDP.
Prints ms/step and gradient MB per vocabulary and each one's ratio to the 2,048-token reference
(issue 13: the old 25-token character vocabulary understated both by 1.6-1.75x).

    PYTHONPATH=$PWD python benchmarks/bench_probe_vocab.py [--model tiny] [--steps 30] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="tiny", choices=("tiny", "small", "base"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--vocabs", default="25,2048,8192,30522")
    args = ap.parse_args()

    import torch

    from ddpdoctor.probe import workload

    torch.set_num_threads(1)
    vocabs = [int(v) for v in args.vocabs.split(",")]
    tok = workload.char_tokenizer(args.seq_len)
    coll = workload.collator(tok)
    rng = __import__("random").Random(0)
    seqs = ["".join(rng.choice(workload.AMINO_ACIDS) for _ in range(rng.randint(32, 128))) for _ in range(8)]
    feats = [{k: v for k, v in tok(s, truncation=True, max_length=args.seq_len, padding="max_length",
                                   return_special_tokens_mask=True).items() if k != "token_type_ids"} for s in seqs]
    models = {v: workload.build_model(args.model, tok, args.seq_len, 0, v) for v in vocabs}
    opts = {v: torch.optim.AdamW(m.parameters(), lr=1e-4) for v, m in models.items()}
    per_step = {v: [] for v in vocabs}
    for _ in range(args.rounds):
        for v in vocabs:
            m, opt = models[v], opts[v]
            for i in range(args.steps):
                torch.manual_seed(i)
                batch = coll(feats)
                t0 = time.process_time()
                loss = m(**batch).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                if i >= 3:
                    per_step[v].append((time.process_time() - t0) * 1000.0)
    ref = 2048 if 2048 in vocabs else vocabs[0]
    med = {v: statistics.median(per_step[v]) for v in vocabs}
    grad = {v: sum(p.numel() for p in models[v].parameters()) * 4 / 2**20 for v in vocabs}
    print(f"model {args.model}, seq {args.seq_len}, batch 8, 1 thread; load {open('/proc/loadavg').read().split()[0]}")
    print(f"{'vocab':>7} {'ms/step':>9} {'x ref':>7} {'grad MB':>8} {'x ref':>7}")
    for v in vocabs:
        print(f"{v:>7} {med[v]:9.1f} {med[v] / med[ref]:7.2f} {grad[v]:8.2f} {grad[v] / grad[ref]:7.2f}")


if __name__ == "__main__":
    main()
