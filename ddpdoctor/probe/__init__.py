"""ddpdoctor probe: a short, real, instrumented DDP Trainer run that explains where the time goes.

`ddpdoctor probe --cpu --nproc 2` (or `--gpus N`) launches the embedded protein masked-LM job
through torch's elastic launcher, plus a 1-rank baseline (and, on request, the `mp.spawn` way of the
original question, or DataParallel), then turns the per-rank measurements into findings
(checks PRB001.. in `ddpdoctor/checks/prb.py`). `python -m ddpdoctor.probe` is one rank, for a
user's own torchrun or srun across nodes.

This package imports nothing heavy at import time; the worker imports torch and transformers.
"""
