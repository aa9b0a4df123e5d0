"""The precision a job asks for against what its GPUs compute fast."""
from __future__ import annotations

from ddpdoctor.facts.gpu import view
from ddpdoctor.facts.gpu_versions import fp16_without_speedup
from ddpdoctor.facts.launch import fp16_asked
from ddpdoctor.model import warning
from ddpdoctor.model.registry import check


@check("GPU037", "fp16-without-fast-fp16", family="gpu", needs=("gpus",), reads=("env", "launch", "lint"))
def fp16_without_fast_fp16(snap):
    """fp16 mixed precision asked of GPUs that compute fp16 no faster than fp32.

    What it checks
        Every ask for fp16 this job makes (ACCELERATE_MIXED_PRECISION=fp16, accelerate launch
        --mixed_precision fp16, the program's --fp16 / --precision 16-mixed, TrainingArguments(fp16=True)
        in the script, `fp16: true` or DeepSpeed's fp16.enabled in its config) against each visible GPU's
        compute capability: below 7.0 there are no tensor cores, and on 3.x, 5.0, 5.2 (no native fp16
        arithmetic) and 6.1 (fp16 at 2 results per clock per SM against fp32's 128: GTX 10x0, Tesla
        P4/P40) fp16 is slower than fp32 (CUDA C++ Programming Guide, "Throughput of Native Arithmetic
        Instructions"; data/gpu_versions.json fp16_throughput).

    Why it matters
        Mixed precision is asked for speed; on these GPUs it buys none and adds the casts and the loss
        scaling: the job runs slower than in fp32 (open-mmlab/mmdetection#3526: fp16 on Tesla P40s about
        4x slower). How much slower depends on the kernels torch picks (a guess until measured).

    Example
        accelerate launch --mixed_precision fp16 train.py   # on 4x Tesla P40 (6.1)

    Fix
        accelerate launch --mixed_precision no train.py   # fp32 on these GPUs; fp16 pays from Volta (7.0) on
    """
    asks = fp16_asked(snap)
    if not asks:
        return
    slow = {}
    for d in view(snap).devices:
        why = fp16_without_speedup(d.get("cuda_capability"))
        if why is not None:
            slow[d["index"]] = (d, why)
    if not slow:
        return
    models = sorted({f"{d.get('name')} ({d['cuda_capability'][0]}.{d['cuda_capability'][1]})" for d, _ in slow.values()})
    where, subject = asks[0]
    rates = sorted({(w["fp16"], w["fp32"]) for _, w in slow.values()}, key=str)
    said = "; ".join(f"fp16 {'not native' if a is None else a} vs fp32 {b} results per clock per SM" for a, b in rates)
    src = next(iter(slow.values()))[1]["source"]
    yield warning(
        f"fp16 asked ({where}) on {', '.join(models)}: no tensor cores, fp16 no faster than fp32 there",
        detail=(f"These GPUs have no tensor cores (compute capability below 7.0) and {said} ({src['url']}, "
                f"{src['where'].split(':')[0]}), so fp16 mixed precision adds casts and loss scaling for no speed-up: "
                "expect it slower than fp32. Other asks: " + (", ".join(w for w, _ in asks[1:]) or "none") + "."),
        fix=(f"train in fp32 on these GPUs (drop {where.split()[-1] if where.startswith('ACCELERATE') else where}); "
             "fp16 pays from compute capability 7.0 (Volta) on"),
        subjects=[subject] + [f"gpu:{i}" for i in sorted(slow)],
        evidence={"asked": [w for w, _ in asks], "gpus": {str(i): list(d["cuda_capability"]) for i, (d, _) in
                                                          sorted(slow.items())},
                  "rates": [list(r) for r in rates]},
    )
