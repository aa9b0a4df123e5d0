"""`ddpdoctor comm`: a bounded connectivity and bandwidth test that names the culprit.

Parent side (`api`, `cli`, `section`) never imports torch: it launches ranks through
`ddpdoctor.launch` (torch's elastic agent) and turns their per-rank results into the `comm`
snapshot section that `ddpdoctor.checks.comm` judges. The worker (`python -m ddpdoctor.comm`,
`worker.py`) runs the phases; it also runs as is under a user's torchrun or srun across nodes.
"""
