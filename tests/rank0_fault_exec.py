"""Run `python -m ddpdoctor ARGS` as this rank, with DDPDOCTOR_TEST_RANK0_FAULT copied into rank 0's
DDPDOCTOR_COMM_FAULT only: a launcher gives every rank the same environment, and a test of "rank 0
is broken" needs one rank, not all, to misbehave for real."""
import os
import sys

if __name__ == "__main__":
    fault = os.environ.pop("DDPDOCTOR_TEST_RANK0_FAULT", "")
    if os.environ.get("RANK") == "0" and fault:
        os.environ["DDPDOCTOR_COMM_FAULT"] = fault
    os.execv(sys.executable, [sys.executable, "-m", "ddpdoctor", *sys.argv[1:]])
