"""Warnings the logs carry about the environment: the tokenizers fork, versions that differ across nodes."""
from __future__ import annotations

from ..job import Job
from ..verdict import consequence_sentence, consequences, timeouts_owner
from . import hit, rule


@rule("LOG013", "tokenizers-fork", catalogue=("D1", "D2"))
def tokenizers_fork(job: Job):
    """A process forked after the tokenizers library used its thread pool (and may have deadlocked).

    What it checks
        `huggingface/tokenizers: The current process just got forked, after parallelism has already
        been used. Disabling parallelism to avoid deadlocks...` (tokenizers 0.8.1 to 0.22.1; silent
        since 0.22.2), and whether TOKENIZERS_PARALLELISM was forced on, or a hang followed.

    Why it matters
        The warning itself is harmless: tokenizers turns its parallelism off in the child. With
        TOKENIZERS_PARALLELISM=true forced, the forked DataLoader worker deadlocks on its first
        batch (huggingface/tokenizers#187; measured 10 of 10 runs), the rank stops, and its peers
        time out.

    Example
        huggingface/tokenizers: The current process just got forked, after parallelism has already
        been used. Disabling parallelism to avoid deadlocks...

    Fix
        `export TOKENIZERS_PARALLELISM=false` before the script imports tokenizers, or tokenize
        before training (datasets.map) so workers never call the tokenizer.
    """
    occ = job.get("tokenizers_fork")
    if not occ or not occ.count:
        return
    forced = job.get("tokenizers_forced")
    hang = bool(job.timeout_table()) or job.has("gloo_timeout")
    ev = occ.first[0]
    cons = {}
    if forced and forced.count:
        sev, title = "error", "tokenizers: forked with TOKENIZERS_PARALLELISM=true forced, the deadlock case"
        detail = ("TOKENIZERS_PARALLELISM=true is set, so a forked DataLoader worker that encodes deadlocks on its "
                  "first batch; the rank then stops issuing collectives.")
        if timeouts_owner(job) == "LOG013":
            cons = consequences(job, occ.ranks)
            detail += " " + consequence_sentence(cons)
    elif hang:
        sev, title = "warning", "tokenizers: processes forked after parallel tokenization, and the job later hung"
        detail = ("Forking after tokenizers used its thread pool can deadlock the child; the timeouts in this log may "
                  "come from a worker stuck in encode. The warning says parallelism was disabled in the child, which "
                  "avoids it unless TOKENIZERS_PARALLELISM is forced on.")
    else:
        sev, title = "info", "tokenizers: processes forked after parallel tokenization (parallelism disabled in them)"
        detail = ("Harmless here: tokenizers disabled its parallelism in the forked children. Silence it, and keep it "
                  "from becoming a deadlock, by setting TOKENIZERS_PARALLELISM=false.")
    yield hit(job, sev, title, at=ev.line, stage=3 if sev != "error" else 2, ranks=occ.ranks, hosts=occ.hosts,
              count=occ.count, detail=detail,
              fix=("export TOKENIZERS_PARALLELISM=false   # before python imports tokenizers\n"
                   "ddpdoctor lint train.py               # finds tokenizer use before DataLoader workers fork"),
              evidence={"forced_on": bool(forced and forced.count), "hang_in_log": hang,
                        **({"consequences": cons} if cons else {})})


def _major(v: str) -> str:
    return ".".join(v.split("+")[0].split(".")[:2])


@rule("LOG017", "versions-differ", catalogue=("C4",))
def versions_differ(job: Job):
    """torch, NCCL or CUDA versions differ across the nodes or ranks of one job.

    What it checks
        The versions each node or rank printed: `NCCL version 2.18.1+cuda12.1` (NCCL INFO, per host),
        `PyTorch version: 2.3.0` (collect_env), `torch==2.3.0`, `CUDA used to build PyTorch: 12.1`.

    Why it matters
        NCCL must be the same version on every rank ("The NCCL version needs to match",
        NVIDIA/nccl#286); mixed torch builds disagree on collectives' wire format and hang or fail with
        internal errors (pytorch/pytorch#122571).

    Example
        node-a:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1
        node-b:12:12 [0] NCCL INFO NCCL version 2.19.3+cuda12.2

    Fix
        Run every node from the same image or environment. `ddpdoctor check` on each node prints its
        torch, CUDA and NCCL versions.
    """
    by_what = {}
    for who, vers in job.versions.items():
        for what, v in vers.items():
            by_what.setdefault(what, {}).setdefault(v, []).append(who)
    differ = {what: values for what, values in by_what.items() if len(values) > 1}
    if not differ:
        return
    parts, hosts, ranks, sev = [], set(), set(), "warning"
    for what in ("nccl", "torch", "cuda"):
        values = differ.get(what)
        if not values:
            continue
        parts.append(f"{what} " + " vs ".join(f"{v} ({', '.join(sorted(w)[:3])})" for v, w in sorted(values.items())))
        for ws in values.values():
            hosts |= {w.split(":", 1)[1] for w in ws if w.startswith("host:")}
            ranks |= {int(w.split(":", 1)[1]) for w in ws if w.startswith("rank:")}
        if what == "nccl" or len({_major(v) for v in values}) > 1:
            sev = "error"
    yield hit(job, sev, "versions differ across the job: " + "; ".join(parts), stage=3, ranks=ranks, hosts=hosts,
              detail=("Every rank of one job must run the same torch, CUDA and NCCL. Mixed versions hang or fail inside "
                      "collectives with errors that do not name the cause."),
              fix="# one image / environment for every node, then:\nddpdoctor check   # on each node: torch, CUDA, NCCL",
              evidence={"versions": {what: {v: sorted(w) for v, w in values.items()} for what, values in differ.items()}})
