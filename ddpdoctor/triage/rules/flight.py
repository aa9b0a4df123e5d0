"""Flight Recorder dumps: the first collective where the ranks diverge, from any subset of dumps."""
from __future__ import annotations

from ..job import Job
from ..verdict import fr_results
from . import hit, rule, who


@rule("LOG019", "flight-recorder-divergence", catalogue=("C3", "F8"))
def flight_recorder_divergence(job: Job):
    """Flight Recorder dumps show ranks that diverged: a mismatched collective, or one some ranks never issued.

    What it checks
        Every rank's dump (pickle or JSON, read without executing anything): per process group and
        collective sequence number, the operation and input sizes on each rank. It reports the first
        sequence number where ranks disagree (op or shape), the ranks that never issued it, and the
        ranks whose dumps are missing. An incomplete set of dumps is enough.

    Why it matters
        PyTorch's `fr_trace` needs every rank's dump and stops pairing at the first mismatch
        (pytorch/pytorch#118369 is about finding the stuck rank). A mismatch (all_reduce of
        different sizes, or a broadcast on one rank against an all_reduce on the others) hangs or
        aborts the job; the first divergent collective is where the code paths split.

    Example
        rank 0 at seq 12: nccl:all_reduce [[1024]]; ranks 1-3 at seq 12: nccl:all_reduce [[1032]]

    Fix
        Open the user frame recorded with the divergent collective on each side and make the ranks
        take the same path with the same shapes there.
    """
    if not job.flight:
        return
    for res in fr_results(job):
        seq = res.get("first_divergent_seq")
        missing = res.get("missing_dumps") or []
        note = f" No dumps from {who(missing)}." if missing else ""
        frames = "; ".join(f"rank {r} at {w['frame']}" for r, w in sorted((res.get("waiting") or {}).items())
                           if w.get("frame"))
        if res.get("mismatches"):
            mm = res["mismatches"][0]
            sides = "; ".join(f"{who(g['ranks'])}: {g['op']} {g['input_sizes']}" for g in mm["groups"])
            odd = min(mm["groups"], key=lambda g: len(g["ranks"]))["ranks"]
            yield hit(job, "error", f"Flight Recorder: collective #{mm['seq']} differs across ranks ({sides})",
                      stage=2, ranks=odd,
                      detail=(f"In process group {res['pg']}, collective #{mm['seq']} is not the same operation and "
                              f"shape on every rank: {sides}. That is where the ranks' code paths split."
                              + (f" Issued from: {frames}." if frames else "") + note),
                      fix="# open the frame of collective #%d on each side (evidence: waiting) and make every rank\n"
                          "# call the same collective with the same shape there" % mm["seq"],
                      evidence=res)
        elif res.get("never_issued"):
            lag = res["never_issued"]
            yield hit(job, "error", f"Flight Recorder: {who(lag)} never issued collective #{seq} that the others "
                      "wait in", stage=2, ranks=lag,
                      detail=(f"In process group {res['pg']}, {who(res['waiting'])} started collective #{seq}"
                              + (f" ({frames})" if frames else "") + f"; {who(lag)} stopped before it (stuck, busy "
                              "outside collectives, or taking another branch)." + note),
                      fix="py-spy dump --pid <pid of the lagging rank>   # or: ddpdoctor run -- torchrun ...",
                      evidence=res)
        elif missing:
            yield hit(job, "warning", f"Flight Recorder: no dumps from {who(missing)}", stage=3,
                      ranks=missing,
                      detail=("The dumps that exist agree with each other. The ranks without a dump are the first "
                              "suspects: a rank that died or hung hard cannot write one."),
                      fix="ls $(dirname $TORCH_NCCL_DEBUG_INFO_TEMP_FILE)   # on each node: were the dumps written?",
                      evidence=res)
