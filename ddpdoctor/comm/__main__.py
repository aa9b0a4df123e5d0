"""`python -m ddpdoctor.comm`: the per-rank worker, under our launcher, a user's torchrun, or srun."""
from ddpdoctor.comm.worker import main

main()
