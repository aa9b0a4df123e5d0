"""ENV: the launcher and rank environment (displayed family "launcher"): rank variables, threads,
SLURM tasks, CUDA variables."""
