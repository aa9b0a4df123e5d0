"""`ddpdoctor run -- COMMAND`: the doctor inside the user's own, unchanged job.

Two sides:
- the parent (`supervisor`): launches the command, follows its process tree, reads each
  process's beacon (a small file the attach side keeps current), localizes a stall, names the
  first death, and writes the report;
- the attach side (`_site/sitecustomize.py` -> `agent`): loaded into every Python process of the
  job through PYTHONPATH, it does nothing unless DDPDOCTOR_RUN_DIR is set, and never raises into
  the job.

`beacon` is the only format both sides share; `stacks` reads faulthandler dumps; `section`
builds the `run` facts that the checks in `ddpdoctor/checks/run.py` judge.
"""
