"""Placeholders for the runtime sections outside a training process.

`ddpdoctor check` runs in a shell, where the facts of the training process (threads, tokenizers
state, open h5py files, the DataLoader, Trainer args) do not exist. These gatherers say so, so
that the runtime checks are reported as skipped with a reason that tells how to get them.
ddpdoctor.preflight() and DoctorCallback fill the real sections (ddpdoctor/inprocess/runtime/).
"""
from __future__ import annotations

from ddpdoctor.gather import Sources, gatherer

HOW = ("runtime facts are read inside the training process: call ddpdoctor.preflight() in your script or add "
       "ddpdoctor.integrations.DoctorCallback() to the Trainer")


def _unavailable(_src: Sources) -> dict:
    return {"unavailable": HOW}


for _name in ("runtime", "runtime_data", "runtime_trainer", "runtime_peers", "runtime_steps"):
    gatherer(_name)(_unavailable)
