"""`python -m ddpdoctor.probe`: one rank of the probe, under any launcher (torchrun, srun, ours)."""
from ddpdoctor.probe.worker import main

if __name__ == "__main__":
    main()
