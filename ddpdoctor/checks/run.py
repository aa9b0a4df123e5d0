"""Verdicts of `ddpdoctor run`: why the user's own job stalled or which rank died first, and why.

They read the `run` section that ddpdoctor/run/section.py builds from what the parent saw (each
rank's beacon, its stack taken with faulthandler on a signal, its exception or fatal-signal record).
`stall` is set when no rank made progress for --stall-after seconds; `death` when a rank ended
badly. Each fault gets one finding naming the rank(s) and the innermost line of the user's code.
"""
from __future__ import annotations

import shlex
from typing import List, Optional

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.redact import redact_text
from ddpdoctor.model.registry import check
from ddpdoctor.facts import left_alone, model_mismatch, pace, setup_hang
from ddpdoctor.facts import steps as stepsplit
from ddpdoctor.facts import teardown

FAMILY = "run"


def _run(snap) -> dict:
    return snap.get("run") or {}


def _stalled(snap) -> List[dict]:
    """The live ranks of a stall (empty when there was no stall)."""
    sec = _run(snap)
    if not sec.get("stall"):
        return []
    return [r for r in sec.get("ranks") or [] if r.get("alive", True) and not r.get("end")]


def _where(frame: Optional[dict]) -> str:
    if not frame:
        return "(no line of your code on the stack)"
    code = f" `{frame['code']}`" if frame.get("code") else ""
    guard = f" inside `{frame['guard']}`" if frame.get("guard") else ""
    return f"{_short(frame['file'])}:{frame['line']}{code}{guard}"


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1] if path else "?"


def _ranks(rs) -> str:
    nums = sorted((r["rank"] for r in rs if r.get("rank") is not None), key=pace.rank_key)
    if not nums:
        return "an unnamed rank"
    if len(nums) > 2 and all(isinstance(n, int) for n in nums) and nums == list(range(nums[0], nums[-1] + 1)):
        return f"ranks {nums[0]}–{nums[-1]}"
    return ("rank " if len(nums) == 1 else "ranks ") + ", ".join(map(str, nums))


def _subjects(rs, extra=()) -> list:
    out = [f"rank:{r['rank']}" for r in rs if r.get("rank") is not None]
    for r in rs:
        f = r.get("user_frame")
        if f and f"line:{f['line']}" not in out:
            out.append(f"line:{f['line']}")
    return out + list(extra)


def _evidence(snap, rs) -> dict:
    sec = _run(snap)
    return {"stall": sec.get("stall"), "ranks": {str(r.get("rank")): {
        "state": r.get("state"), "doing": r.get("doing"), "step": r.get("step"), "pid": r.get("pid"),
        "host": r.get("host"), "last_collective": r.get("last_collective"),
        "line": _where(r.get("user_frame")), "stack": r.get("stack")} for r in rs}}


def _groups(rs) -> list:
    """Ranks grouped by what they do and where: [(key, [ranks])], largest group first."""
    groups: dict = {}
    for r in rs:
        f = r.get("user_frame") or {}
        key = (r["state"], r.get("doing"), f.get("file"), f.get("line"))
        groups.setdefault(key, []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].get("rank") or 0))


def _waiters(rs) -> list:
    return [r for r in rs if r["state"] in ("collective", "backward", "rendezvous", "ddp-forward")]


def _true_mismatch(snap) -> bool:
    """The same collective called with different shapes or dtypes (or different ops with no rank
    condition in sight): RUN006's case. Different ops where one side sits under `if rank...` is a
    collective only some ranks call: RUN001's."""
    mm = _run(snap).get("mismatch")
    return bool(mm) and not (mm.get("ops_differ") and mm.get("guarded"))


def _line_of(r) -> str:
    step = f", step {r['step']}" if r.get("step") else ""
    return f"{_ranks([r])}: {r.get('doing')} at {_where(r.get('user_frame'))}{step}"


def _train_dl(r) -> tuple:
    """(the rank's TRAINING loader {n, len, end}, whether the rank has left it for another loader). The recorder keeps
    the loader a rank left after optimizer steps were taken in it (run/recorder.py S.dl_tr: "train_loader"); the
    current loader is the training one when steps were taken since it began ("s0") or it is that loader again (a
    new epoch); else the rank is in another loader (the Trainer's epoch-end evaluation: huggingface/transformers
    v5.25.0 src/transformers/trainer.py _run_epoch -> _maybe_log_save_evaluate -> evaluate, after the epoch's loop)
    and its training loader is the one it left. Before a step in the current loader, the recorder's word decides
    (run/recorder.py _loader_origin, data/eval_loops.json): "eval" set, it is an evaluation's (grad mode off when its
    iterator was made, or the Trainer's evaluation_loop made it); else a loader of the training loader's length and
    batch size is the training loader again (a new epoch of a loader made anew: the one case still read by shape)."""
    dl = r.get("dataloader") or {}
    tr = r.get("train_loader")
    if not tr or not dl:
        return dl, False
    if isinstance(dl.get("s0"), int) and isinstance(r.get("step"), int) and r["step"] > dl["s0"]:
        return dl, False
    if dl.get("eval"):
        return tr, True
    if (dl.get("len"), dl.get("bs")) == (tr.get("len"), tr.get("bs")):
        return dl, False
    return tr, True


def _eval_why(dl: dict) -> str:
    """How the other loader is known to be an evaluation's: the recorder's word (grad mode off, the Trainer's evaluation
    loop), or a guess from its shape and the steps (none taken in it)."""
    if dl.get("eval"):
        return f", by {dl['eval']}"
    return ", a guess: no optimizer step in it and not the training loader's length and batch size"


def _ran_out(r) -> bool:
    """The rank's training loader ended short of its length, or ended and the rank left the training loop for another
    loader. A loader consumed in full (n of n) whose rank is still in it is not: accelerate's DataLoaderShard fetches
    one batch ahead ("We iterate one batch ahead to check when we are at the end": huggingface/accelerate v1.16.0
    src/accelerate/data_loader.py DataLoaderShard.__iter__), so the end flag is up during the last step itself."""
    tdl, left = _train_dl(r)
    n, ln = tdl.get("n"), tdl.get("len")
    short = isinstance(n, int) and isinstance(ln, int) and n < ln
    # Round 25 (runcol26's run-r26 j4): a rank that LEFT its training loader for another one (the Trainer's epoch-end
    # evaluation) after fewer batches than the loader's length ran out too, whether or not its end came through the
    # hook (a wrapper above the hook, itertools.islice or a sampler shorter than len() can end an epoch without a
    # StopIteration here). A loop that breaks at a step cap on every rank leaves every loader short alike: _uneven
    # then finds no rank still going with more batches.
    return (bool(tdl.get("end")) and (left or short)) or (left and short)


def _uneven_parted(snap) -> Optional[dict]:
    """Uneven batches behind a collective mismatch that killed a rank (round 23, issue 27; runcol23's run-r23 j3): at a
    death with RUN006's true mismatch, the ranks' training loaders (dead ranks' included: their last record) were of
    different lengths, or the same loader's completed epochs took different numbers of optimizer steps on different
    ranks (run/recorder.py: "eps", the steps of the last epoch that ended; counted at each epoch's new iterator, so it
    holds where the loader's end was not seen). The rank with fewer batches left training early and its next
    collective (the Trainer's epoch-end logging gather, a final all_reduce) met its peer's next step's: with Gloo the
    sizes disagree and the rank aborts (data/messages.json gloo.tcp.received_size_mismatch: facebookincubator/gloo
    gloo/transport/tcp/pair.cc @cc441984, "Received data size doesn't match expected size"), which reads as a
    mismatch; the cause is the batches. {"short": ranks, "rows": {rank: (len, eps[, n])}, "by": "length" | "epoch" |
    "end"}."""
    sec = _run(snap)
    if not sec.get("death") or sec.get("stall"):
        return None
    mm = _true_mismatch(snap)
    rows = {}
    for r in sec.get("ranks") or []:
        if r.get("rank") is None or not r.get("dataloader"):
            continue
        tdl = _train_dl(r)[0]
        rows[r["rank"]] = (tdl.get("len"), tdl.get("eps"))
    if len(rows) < 2:
        return None
    lens = {v[0] for v in rows.values()}
    if not mm:
        return _ran_out_first(sec, rows) or _left_cleanly(sec, rows)
    if None not in lens and len(lens) > 1:
        low = min(lens)
        return {"short": sorted(k for k, v in rows.items() if v[0] == low), "rows": rows, "by": "length"}
    eps = {v[1] for v in rows.values()}
    if len(lens) == 1 and None not in eps and len(eps) > 1:
        low = min(eps)
        return {"short": sorted(k for k, v in rows.items() if v[1] == low), "rows": rows, "by": "epoch"}
    return _ran_out_first(sec, rows, mm=True)


def _left_cleanly(sec: dict, rows: dict) -> Optional[dict]:
    """Uneven batches whose short rank ENDED WELL (round 24, runcol25's run-r25 j8): it ran out of batches first, finished
    its epochs and exited with status 0, while a peer still trained; the peer, inside its step's gradient all-reduce,
    then died of the lost connection ("Connection closed by peer": its end's why is "peer-lost"), which reads as the
    first death. The ranks' training loaders show it: different lengths, or the same length with fewer optimizer steps
    per epoch ("eps") on the rank that left. The short ranks must be the ones that exited cleanly (no end record)."""
    d = sec.get("death") or {}
    first = next((r for r in sec.get("ranks") or [] if r.get("rank") == d.get("first_rank")), None)
    if first is None or (first.get("end") or {}).get("why") != "peer-lost":
        return None
    clean = {r["rank"] for r in sec.get("ranks") or [] if r.get("rank") in rows and not r.get("end")
             and r.get("doing") == "exited"}
    if not clean:
        return None
    lens = {v[0] for v in rows.values()}
    eps = {v[1] for v in rows.values()}
    if None not in lens and len(lens) > 1:
        low, by = min(lens), "length"
        short = {k for k, v in rows.items() if v[0] == low}
    elif len(lens) == 1 and None not in eps and len(eps) > 1:
        low, by = min(eps), "epoch"
        short = {k for k, v in rows.items() if v[1] == low}
    else:
        return None
    if not short <= clean or first["rank"] in short:
        return None
    return {"short": sorted(short), "rows": rows, "by": by, "clean_exit": True}


def _ran_out_first(sec: dict, rows: dict, mm: bool = False) -> Optional[dict]:
    """The "by end" reading of _uneven_parted. Without a recorded mismatch (the peer was inside DDP's own gradient
    all-reduce, which no user-level record holds) it needs the first rank that died to be one whose loader ran out:
    it died at the next collective after its data ended (a real 2-rank Gloo job: rank 1 with 9 of 19 records sharded
    by hand aborted in its final all_reduce with Gloo's "Received data size doesn't match expected size")."""
    # Round 24 (run26's left class): inside the FIRST epoch no "eps" exists yet, and a loader with no length (an
    # IterableDataset sharded per rank) gives no "len" to compare: the rank whose training loader ENDED (its iterator
    # raised StopIteration through the hook: "end") after n batches, while a peer's training loader, not ended, had
    # fetched more than n in the same epoch, had fewer batches. With equal known lengths an ended loader holds n = len
    # >= any peer's n in that epoch, so the comparison only fires where the data itself was uneven.
    eps = {v[1] for v in rows.values()}
    ended = {r["rank"]: (_train_dl(r)[0].get("n") or 0) for r in sec.get("ranks") or []
             if r.get("rank") in rows and _train_dl(r)[0].get("end")}
    going = {r["rank"]: (_train_dl(r)[0].get("n") or 0) for r in sec.get("ranks") or []
             if r.get("rank") in rows and not _train_dl(r)[0].get("end")}
    if not (ended and going and max(going.values()) > max(ended.values()) and len(eps) == 1):
        return None
    if not mm and (sec.get("death") or {}).get("first_rank") not in ended:
        return None
    rows = {k: (v[0], v[1], ended.get(k, going.get(k))) for k, v in rows.items()}
    return {"short": sorted(ended), "rows": rows, "by": "end"}


def _uneven(rs) -> bool:
    """Different training-loader lengths, or one rank's training loader ran out while another's still fetches. With
    the same length everywhere, a rank still fetching that has taken at least as many optimizer steps as the one
    that ran out, and fetched no more batches, is in the next epoch, not short of data: the ended rank waits in
    something only it calls at the epoch's end (a rank-0 save's barrier: RUN001's case)."""
    withdl = [r for r in rs if r.get("dataloader")]
    if len(withdl) < 2:
        return False
    tdls = {id(r): _train_dl(r)[0] for r in withdl}
    lens = {tdls[id(r)].get("len") for r in withdl}
    if len(lens - {None}) > 1:
        return True
    ended = [r for r in withdl if _ran_out(r)]
    if ended:
        going = [r for r in withdl if not _ran_out(r)]
    else:
        ended = [r for r in withdl if tdls[id(r)].get("end")]
        going = [r for r in withdl if not tdls[id(r)].get("end")]
    if not ended or not going:
        return False
    if len(lens) == 1 and None not in lens:
        last = max(r.get("step") or 0 for r in ended)
        most = max(tdls[id(r)].get("n") or 0 for r in ended)
        if all(isinstance(r.get("step"), int) and r["step"] >= last and (tdls[id(r)].get("n") or 0) <= most
               for r in going):
            return False
    return True


@check("RUN001", "stall-collective-not-called-by-all", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def collective_not_called_by_all(snap):
    """A collective that only some ranks call: they wait in it forever while the others do something else.

    What it checks
        At a stall, ranks blocked in a user-level collective (e.g. `dist.barrier()`) that the other
        ranks are not in: those wait in another collective (the DDP gradient all-reduce of the next
        backward, or a different call). It names each group's innermost line of your code and the
        enclosing `if` that mentions the rank. Also from the collective sequence, at a stall or after
        the job failed: a rank issued collective #N of a group (its last, recorded by the recorder)
        that the others never issued, while they went past it (into DDP's gradient all-reduce of the
        next backward, another collective, or a clean exit) and its line sits under `if rank == 0:` /
        `if accelerator.is_main_process:` (or every other rank finished and exited). The timeouts and "Connection
        closed by peer" errors that follow are its consequences: RUN010 stays quiet.

    Why it matters
        Collectives match by order, not by name. A barrier only rank 0 reaches (logging, saving,
        evaluation under `if rank == 0:`) meets nothing on the other ranks. With Gloo nothing fails:
        every rank blocks until the process-group timeout (30 minutes by default), then each prints
        the same watchdog error, which names no rank and no line.

    Example
        if rank == 0:
            dist.barrier()      # rank 0 waits here; rank 1 is already in the next backward
        loss.backward()

    Fix
        Call the collective on every rank (move it out of the `if`), or use a subgroup that holds
        only the ranks that take the branch.
    """
    extra = _run(snap).get("extra_collective")
    # after a failure, or when the gate is a caller's (the stall's innermost lines do not show it), from the sequence
    if extra and (_run(snap).get("death") or extra.get("gate_frame") or not any(_skipped_at_stall(snap))):
        yield _extra_collective(snap, extra)
        return
    yield from _skipped_at_stall(snap)


def _skipped_at_stall(snap):
    """RUN001 from the live ranks of a stall: ranks in a user collective that the others are not in."""
    rs = _stalled(snap)
    if not rs or _uneven(rs):
        return
    if _true_mismatch(snap):
        return  # RUN006
    coll = [r for r in rs if r["state"] == "collective"]
    others = [r for r in rs if r not in coll]
    if not coll:
        return
    if others and not all(r["state"] in ("backward", "ddp-forward", "collective", "exited", "teardown") for r in others):
        return  # someone is outside any collective: RUN002 or RUN003 says who
    if not others:
        # all in user collectives: the group under a rank condition (else the smaller one) is the odd one
        groups = _groups(coll)
        if len(groups) < 2:
            return
        guarded = [r for r in coll if (r.get("user_frame") or {}).get("guard")]
        odd = guarded if guarded and len(guarded) < len(coll) else [r for _, g in groups[1:] for r in g]
        others = [r for r in coll if r not in odd]
        coll = odd
    lines = [_line_of(r) for r in coll] + [_line_of(r) for r in others]
    c = coll[0].get("last_collective") or {}
    if _left_loop_early(coll, others):
        yield _loop_exit_parted(snap, rs, coll, others, c, lines)
        return
    yield error(
        f"{_ranks(coll)} wait{'s' if len(coll) == 1 else ''} in {c.get('op')}() at {_where(coll[0].get('user_frame'))}, "
        f"which {_ranks(others)} never reach{'es' if len(others) == 1 else ''}: "
        f"{others[0].get('doing')} at {_where(others[0].get('user_frame'))}",
        detail="No rank has made progress for {:.0f} s. ".format((_run(snap).get("stall") or {}).get("idle_s") or 0)
               + "; ".join(lines) + ". Every rank would block until the process-group timeout.",
        fix=f"Call {c.get('op')}() on every rank, outside the `if` (or give the branch its own subgroup: "
            "dist.new_group(ranks=[0]))",
        subjects=_subjects(coll + others), evidence=_evidence(snap, rs))


def _left_loop_early(coll: list, others: list) -> bool:
    """The ranks in the collective wait AFTER their training loop (section: "after_loop", by the loop's lines) with no
    rank test around the call, while every other rank is still in its loop: they stopped their loop by a condition of
    their own (a wall-clock budget read on each rank's clock, early stopping on a per-rank metric, a NaN check), and
    the call after the loop is one the others reach only later. Round 25 (runcol26's run-r26 j10/j11)."""
    return bool(coll) and bool(others) and all(
        r.get("after_loop") is True and not (r.get("user_frame") or {}).get("guard") for r in coll) and all(
        r.get("after_loop") is not True for r in others)


def _loop_exit_parted(snap, rs: list, coll: list, others: list, c: dict, lines: list):
    """RUN001 when the odd ranks left their loop early: the cause is the stop condition, not an `if` around the call."""
    tdl = _train_dl(coll[0])[0]
    at = (f" after batch {tdl.get('n')}{_of_len(tdl)}" if isinstance(tdl.get("n"), int) else "")
    loop = coll[0].get("loop_frame") or {}
    lw = f" (the loop at {_where(loop)})" if loop.get("line") else ""
    return error(
        f"{_ranks(coll)} left {'its' if len(coll) == 1 else 'their'} training loop{at}{lw} and wait"
        f"{'s' if len(coll) == 1 else ''} in {c.get('op')}() after it at {_where(coll[0].get('user_frame'))}, while "
        f"{_ranks(others)} still train{'s' if len(others) == 1 else ''}: {others[0].get('doing')} at "
        f"{_where(others[0].get('user_frame'))}",
        detail=("No rank has made progress for {:.0f} s. ".format((_run(snap).get("stall") or {}).get("idle_s") or 0)
                + "; ".join(lines) + ". The call has no rank test around it: the ranks disagree on when the loop ends "
                "(a stop condition each rank reads for itself: a wall-clock budget on its own clock, early stopping on "
                "its own metric, a NaN check, a data iterator that ends sooner on one rank). The ranks that stopped "
                "wait there for the others' next collectives, which never match."),
        fix=("Decide the stop on every rank together, at the same step: stop = torch.tensor(int(<your condition>)); "
             "dist.all_reduce(stop, op=dist.ReduceOp.MAX); if stop.item(): break  (or compute it on rank 0 and "
             "dist.broadcast it)"),
        subjects=_subjects(coll + others), evidence=_evidence(snap, rs))


ELSEWHERE = {"backward": "went on to the DDP gradient all-reduce of its next backward",
             "forward": "went on to DDP's forward synchronisation", "exited": "finished its work and exited",
             "peer-lost": "lost its connection when that rank's side closed",
             "collective": "waited in another collective (DDP's backward or a call of its own)"}


def _timed_out(end: dict) -> bool:
    exc = end.get("exception") or {}
    text = f"{exc.get('type') or ''} {exc.get('message') or ''}".lower()
    return "timed out" in text or "timeout" in text


def _extra_collective(snap, extra: dict):
    """RUN001 from the collective sequence: the ranks ahead issued collective #seq that the others never will."""
    sec = _run(snap)
    ahead = [{"rank": r} for r in extra["ranks"]]
    others = extra["others"]
    frame = extra.get("user_frame")
    op = extra.get("op") or "a collective"
    where_o = []
    for o in others:
        w = ELSEWHERE[o["where"]] + (f" ({o['doing']})" if o["where"] == "collective" and "#" in f"{o.get('doing')}"
                                     else "")
        at = f" at {_where(o['user_frame'])}" if o.get("user_frame") and o["where"] != "exited" else ""
        where_o.append(f"rank {o['rank']} had issued {o['issued']} of that group and {w}{at} (step "
                       f"{o.get('step') or 0})")
    if sec.get("death"):
        tmo = extra.get("timeout_s")
        timed = any(_timed_out((r.get("end") or {})) for r in sec.get("ranks") or [])
        ended = (f"The process group's timeout{f' ({tmo:g} s)' if isinstance(tmo, (int, float)) else ''} then ended "
                 "the ranks waiting in it" if timed else "The job then failed when the ranks' connections closed")
        tail = ended + ": those errors are consequences, not the cause. " + _order_text(sec, None, as_ends=True)
    else:
        tail = "Every rank waits until the process group's timeout."
    gf = extra.get("gate_frame")
    gate = (f", called from {_short(gf.get('file', ''))}:{gf.get('line')}" + (f" `{gf['code']}`" if gf.get("code") else "")
            if gf else "") + (f" inside `{extra['guard']}`" if extra.get("guard") else "")
    code = f" `{frame['code']}`" if (frame or {}).get("code") else ""
    line = f"{_short((frame or {}).get('file', ''))}:{(frame or {}).get('line')}" if frame else extra.get("line")
    group = "" if not extra.get("group") else f" of group {extra.get('group_name') or extra['group']}"
    gated = "the branch" if extra.get("guard") else "that call"
    yield_title = (f"{_ranks(ahead)} called {op}() (collective #{extra['seq']}{group}) at {line}{code}{gate}, "
                   f"which {_ranks(others)} never call{'s' if len(others) == 1 else ''}: " + "; ".join(
                       f"rank {o['rank']} {ELSEWHERE[o['where']]}" for o in others))
    detail = (f"Collectives match by order, not by name: {_ranks(ahead)} issued {op} #{extra['seq']} at step "
              f"{extra.get('step') or 0}; " + "; ".join(where_o) + ". " + tail)
    moved = f" `{gf['code']}`" if gf and gf.get("code") else code or " it"
    fix = (f"Call {op}() on every rank: move{moved} out of `{extra['guard']}`" if extra.get("guard") else
           f"Call {op}() on every rank, or on none") + \
        (" (accelerate's wait_for_everyone(), gather() and reduce(), and the Trainer's save, are collectives: every "
         "process must reach them); or give " + gated + " its own subgroup: dist.new_group(ranks=[" +
         ", ".join(str(r) for r in extra["ranks"]) + "])")
    subj = [f"rank:{r}" for r in extra["ranks"]] + [f"rank:{o['rank']}" for o in others if o.get("rank") is not None]
    for fr in (gf, frame):
        if fr and fr.get("line") and f"line:{fr['line']}" not in subj:
            subj.append(f"line:{fr['line']}")
    return error(yield_title, detail=detail.strip(), fix=fix, subjects=subj, evidence={"extra_collective": extra})


@check("RUN002", "stall-rank-outside-collective", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def rank_outside_collective(snap):
    """A rank blocked outside any collective (data read, I/O, sleep, a lock) while the others wait for it.

    What it checks
        At a stall, ranks that wait in a collective (the gradient all-reduce, a barrier) and ranks
        that are in none: their innermost frame of your code is a data read, a file or network call,
        a sleep or a long computation.

    Why it matters
        The waiting ranks print the timeout, but the rank at fault is the one that is not waiting.
        Raising the timeout only delays the failure.

    Example
        def __getitem__(self, i):
            time.sleep(600)     # rank 1 never finishes its batch; rank 0 waits in backward

    Fix
        Fix or bound the blocking call on that rank (a timeout on the read, a retry, a local cache of
        the data); if the slowness is expected, raise the process-group timeout for that phase only.
    """
    rs = _stalled(snap)
    if not rs or _uneven(rs):
        return
    out = [r for r in rs if r["state"] in ("outside", "data")]
    waiting = _waiters(rs)
    if not out or not waiting:
        return
    where = "in data loading" if any(r["state"] == "data" for r in out) else "outside any collective"
    yield error(
        f"{_ranks(out)} {'is' if len(out) == 1 else 'are'} blocked {where} at {_where(out[0].get('user_frame'))}, "
        f"while {_ranks(waiting)} wait{'s' if len(waiting) == 1 else ''} in {waiting[0].get('doing')}",
        detail="; ".join(_line_of(r) for r in out + waiting) + ". The ranks in the collective cannot go on until "
               f"{_ranks(out)} joins.",
        fix=f"Find why {_where(out[0].get('user_frame'))} blocks on {_ranks(out)} (slow storage, a lock, a "
            "sleep) and bound it; raise dist.init_process_group(timeout=...) only if the wait is expected",
        subjects=_subjects(out + waiting), evidence=_evidence(snap, rs))


@check("RUN014", "stall-rank-busy", family=FAMILY, when=("run",), needs=("run",), catalogue=("F11",))
def rank_busy(snap):
    """A rank is busy computing outside any collective while the others wait for it: work, not a hang.

    What it checks
        At a stall, ranks outside any collective whose CPU use over the stall was half a core or
        more, or whose main thread was running or runnable in most of 10 samples (on a loaded host a
        working rank gets less than half a core), from /proc: the rank is working, while other
        ranks wait in a collective. It says
        what the work is (the innermost line of your code and the library call under it), how long
        the others have waited, and the timeout that applies to them: the one the process group
        really got, not the one the script asked for.

    Why it matters
        Rank 0 tokenising a dataset inside `main_process_first()` while the others wait in its
        barrier is normal, until the wait outlives the process-group timeout; then the whole job dies
        with a timeout that names no rank. A busy rank is not a blocked one: calling it "blocked"
        (a sleep, a lock) sends the user after the wrong cause.

    Example
        with training_args.main_process_first():
            dataset = dataset.map(tokenize)   # 40 s on rank 0; rank 1 waits in a barrier

    Fix
        Nothing, if the work ends well within the timeout. Otherwise preprocess once ahead of the
        job (and cache it), or raise the timeout for that phase (TrainingArguments(ddp_timeout=...)
        on GPU; init_process_group(timeout=...)).
    """
    rs = _stalled(snap)
    busy = [r for r in rs if r["state"] == "busy"]
    waiting = _waiters(rs)
    if not busy or not waiting:
        return
    b = busy[0]
    timeout = max((r.get("pg_timeout_s") or 0) for r in waiting) or None
    waited = max((r.get("since_s") or 0) for r in waiting)
    stall = _run(snap).get("stall") or {}
    left = (timeout - waited) if timeout else None
    near = left is not None and left <= max(2 * float(stall.get("stall_after_s") or 0), 0.1 * timeout)
    lib = ""
    stack = b.get("stack") or []
    if stack and stack[-1].startswith("... "):
        lib = " (" + stack[-1].split("innermost ", 1)[-1] + ")"
    cpu = f"{100 * (b.get('cpu_frac') or 0):.0f}% of a core" + (
        f", runnable in {100 * b['running_frac']:.0f}% of samples" if b.get("running_frac") is not None else "")
    tmo = (f"; {_ranks(waiting)} time{'s' if len(waiting) == 1 else ''} out in {left / 60:.1f} min (the process "
           f"group's timeout, {timeout:.0f} s)" if timeout and left is not None and left > 0 else
           f"; the process group's timeout ({timeout:.0f} s) has passed" if timeout else "")
    title = (f"{_ranks(busy)} {'is' if len(busy) == 1 else 'are'} busy computing ({cpu}) at {_where(b.get('user_frame'))}"
             f"{lib} while {_ranks(waiting)} wait{'s' if len(waiting) == 1 else ''} in {waiting[0].get('doing')} "
             f"for {waited:.0f} s{tmo}")
    detail = ("; ".join(_line_of(r) for r in busy + waiting) + ". A rank that uses the CPU is doing work, not blocked: "
              "the others go on when it reaches the collective." +
              (" It will not make it in time at this pace: the timeout is near." if near else ""))
    fix = ("Preprocess once ahead of the job and load the cached result, or raise the timeout for this phase: "
           "init_process_group(timeout=datetime.timedelta(hours=2)) (TrainingArguments(ddp_timeout=7200) where the "
           "Trainer passes it: not on CPU with use_cpu)")
    ev = dict(_evidence(snap, rs), timeout_s=timeout, waited_s=round(waited, 1), left_s=round(left, 1) if left else None,
              cpu_frac={str(r.get("rank")): r.get("cpu_frac") for r in busy})
    yield (error if near else warning)(title, detail=detail, fix=fix, subjects=_subjects(busy + waiting), evidence=ev)


@check("RUN003", "stall-dataloader-worker", family=FAMILY, when=("run",), needs=("run",), catalogue=("D2", "E1"))
def dataloader_worker(snap):
    """A rank waits for a DataLoader worker that makes no progress (tokenizers after fork, a deadlocked lock).

    What it checks
        At a stall, ranks waiting for a batch from their DataLoader's worker processes, and the stack
        of those workers. When the workers were forked after the tokenizers thread pool had run in the
        rank and TOKENIZERS_PARALLELISM was set on, it names that deadlock.

    Why it matters
        A forked child gets a copy of the parent's locks but not its threads. tokenizers' Rust thread
        pool, once used, deadlocks in a forked child that encodes a batch when TOKENIZERS_PARALLELISM
        forces parallelism on (tokenizers ≥ 0.22.2 stays silent about it). The rank then waits forever
        and its peers time out in the next collective.

    Example
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        tok.encode_batch(texts)                       # pool started in the rank
        DataLoader(ds, num_workers=2)                 # forked workers call tok.encode_batch -> hang

    Fix
        export TOKENIZERS_PARALLELISM=false (before tokenizers is imported), or tokenize before the
        DataLoader forks, or use multiprocessing_context="spawn" for the DataLoader.
    """
    rs = _stalled(snap)
    if not rs:
        return
    stuck = [r for r in rs if r["state"] == "data-workers"]
    if not stuck:
        return
    r = stuck[0]
    ws = [w for w in r.get("workers") or [] if w.get("alive", True)]
    w = next((w for w in ws if w.get("user_frame")), ws[0] if ws else None)
    tok = (w or {}).get("tokenizers") or {}
    forced = str(tok.get("TOKENIZERS_PARALLELISM") or "").strip().lower() not in ("", "off", "false", "f", "no", "n", "0") \
        and tok.get("TOKENIZERS_PARALLELISM") is not None
    wframe = (w or {}).get("user_frame")
    in_tok = tok.get("imported") and (w or {}).get("in_tokenizers") or (wframe and "encode" in (wframe.get("code") or ""))
    if tok.get("imported") and forced and in_tok:
        title = (f"tokenizers deadlock in a forked DataLoader worker of {_ranks(stuck)}: the worker hangs at "
                 f"{_where(wframe)} (TOKENIZERS_PARALLELISM={tok.get('TOKENIZERS_PARALLELISM')} forced on)")
        fix = "export TOKENIZERS_PARALLELISM=false  # before tokenizers is imported; or tokenize before the DataLoader forks"
    else:
        title = (f"{_ranks(stuck)} wait{'s' if len(stuck) == 1 else ''} for a DataLoader worker that makes no progress"
                 + (f"; the worker is at {_where(wframe)}" if wframe else ""))
        fix = ("Find what the worker waits for (see its stack); bound it, and set DataLoader(timeout=60) so a stuck "
               "worker raises instead of hanging")
    waiting = _waiters(rs)
    detail = (f"{_ranks(stuck)} {'has' if len(stuck) == 1 else 'have'} waited for a batch for "
              f"{r.get('since_s') or 0:.0f} s at {_where(r.get('user_frame'))}; worker pid(s) "
              f"{', '.join(str(x['pid']) for x in ws) or 'none alive'}." +
              (f" Meanwhile {_ranks(waiting)} wait{'s' if len(waiting) == 1 else ''} in {waiting[0].get('doing')}."
               if waiting else ""))
    ev = _evidence(snap, rs)
    ev["worker"] = {"pid": (w or {}).get("pid"), "stack": (w or {}).get("stack"), "tokenizers": tok}
    extra = ([f"line:{wframe['line']}"] if wframe else []) + (["pkg:tokenizers"] if forced else [])
    yield error(title, detail=detail, fix=fix, subjects=_subjects(stuck, extra),
                evidence=ev)


@check("RUN004", "stall-rank-still-starting", family=FAMILY, when=("run",), needs=("run",), catalogue=("A4",))
def rank_still_starting(snap):
    """A rank is still starting (preprocessing before init_process_group) while the others wait at rendezvous.

    What it checks
        At a stall before the first step: ranks inside init_process_group and ranks that have not
        called it yet. It names the late rank's current line and how long the waiting ranks have
        left before the rendezvous timeout kills the job.

    Why it matters
        init_process_group waits for every rank, up to its timeout (30 minutes by default; the
        Trainer's ddp_timeout). Work done on one rank before it (tokenizing a dataset, downloading
        a model on rank 0 only) makes the others wait; past the timeout the whole job dies with a
        rendezvous error that names no rank.

    Example
        if rank == 0:
            dataset = preprocess(raw)        # 40 minutes, only on rank 0
        dist.init_process_group("gloo")

    Fix
        Initialise the process group first and let the others wait in a barrier with a long enough
        timeout, or preprocess once ahead of the job; raise init_process_group(timeout=...) (Trainer:
        ddp_timeout) above the preprocessing time.
    """
    rs = _stalled(snap)
    late = [r for r in rs if r["state"] == "before-init"]
    waiting = [r for r in rs if r["state"] == "rendezvous"]
    if not late or not waiting:
        return
    timeout = max((r.get("pg_timeout_s") or 0) for r in waiting) or 1800.0
    waited = max((r.get("since_s") or 0) for r in waiting)
    left = max(0.0, timeout - waited)
    yield warning(
        f"{_ranks(late)} {'is' if len(late) == 1 else 'are'} still before init_process_group, at "
        f"{_where(late[0].get('user_frame'))}, while {_ranks(waiting)} wait{'s' if len(waiting) == 1 else ''} "
        f"at rendezvous ({_where(waiting[0].get('user_frame'))}); the job dies in {left / 60:.1f} min "
        f"(timeout {timeout / 60:.0f} min)",
        detail=f"{_ranks(waiting)} entered init_process_group {waited:.0f} s ago. " + "; ".join(
            _line_of(r) for r in late + waiting) + ".",
        fix="Call init_process_group before the long start-up work (others wait in dist.barrier()), or raise "
            "init_process_group(timeout=datetime.timedelta(hours=2)) / TrainingArguments(ddp_timeout=7200)",
        subjects=_subjects(late + waiting), evidence=dict(_evidence(snap, rs), timeout_s=timeout, left_s=round(left)))


@check("RUN005", "stall-uneven-batches", family=FAMILY, when=("run",), needs=("run",), catalogue=("F8",))
def uneven_batches(snap):
    """Ranks got different numbers of batches: one ran out of data while the others still train.

    What it checks
        At a stall, the TRAINING DataLoader of each rank: its length, the batches fetched in this
        epoch, and whether it ran out. Different lengths, or one rank's loader exhausted while another
        still fetches, with the ranks waiting in different collectives. At a death by a collective mismatch
        (RUN006's case, folded under this one): training loaders of different lengths, or the same loader's epochs
        taking different numbers of optimizer steps on different ranks, or, inside an epoch (a loader
        with no length included), one rank's training loader that ran out after fewer batches than a
        peer had already fetched, that rank then dying first at its next collective (the peer inside
        DDP's own gradient all-reduce, which no user-level record holds). A rank that left its training
        loader for another one (the Trainer's epoch-end evaluation) is judged by the training loader
        it left, not by the evaluation's progress; a loader fetched in full (n of n) whose rank is
        still in its last step has not run out.

    Why it matters
        DDP runs one gradient all-reduce per backward. A rank with one batch more waits in an
        all-reduce nobody else joins; with Gloo nothing fails until the timeout.

    Example
        sampler = None                              # each rank slices the data itself
        shard = data[rank::world]                   # 5 items on rank 0, 4 on rank 1

    Fix
        Give every rank the same number of batches: DistributedSampler(drop_last=True) (or
        Trainer's own sampler), or wrap the loop in `with model.join():` (DDP's Join context).
    """
    up = _uneven_parted(snap)
    if up is not None:
        yield _uneven_mismatch(snap, up)
        return
    rs = _stalled(snap)
    if not rs or not _uneven(rs):
        return
    ended = [r for r in rs if _ran_out(r)]
    if not ended:
        ended = [r for r in rs if _train_dl(r)[0].get("end")]
    if not ended:  # different lengths: the shorter loader is the one that runs out
        shortest = min(_train_dl(r)[0].get("len") or 0 for r in rs)
        ended = [r for r in rs if _train_dl(r)[0].get("len") == shortest]
    rows = []
    for r in rs:
        tdl, left = _train_dl(r)
        dl = r.get("dataloader") or {}
        rows.append(f"{_ranks([r])}: {tdl.get('n')} training batch(es) fetched{_of_len(tdl)}"
                    + (" (ran out)" if r in ended else " (all fetched: still in its last step)"
                       if tdl.get("end") else "")
                    + (f", then left the training loop for another DataLoader (batch {dl.get('n')} of {dl.get('len')}:"
                       f" an evaluation{_eval_why(dl)})" if left else "") + f", {r.get('doing')} at {_where(r.get('user_frame'))}")
    more = [r for r in rs if r not in ended]
    e, m = ended[0], (more or [None])[0]
    etdl, eleft = _train_dl(e)
    mtdl = _train_dl(m)[0] if m else {}
    of = f" of {etdl.get('len')}" if eleft or (etdl.get("n") or 0) < (etdl.get("len") or 0) else ""
    yield error(
        f"uneven batches: {_ranks(ended)} ran out of data after {etdl.get('n')}{of} batch(es)"
        + (", left the training loop" if eleft else "")
        + (f" and wait{'s' if len(ended) == 1 else ''} in {e.get('doing')}" if e.get("doing") != "outside any collective"
           else f" and {'is' if len(ended) == 1 else 'are'} outside any collective") + f" at {_where(e.get('user_frame'))}"
        + (" (in another DataLoader, with no optimizer step in it: an evaluation)" if eleft else "")
        + (f", while {_ranks(more)} still train{'s' if len(more) == 1 else ''} (batch "
           f"{mtdl.get('n')}{_of_len(mtdl)}: {m.get('doing')} at "
           f"{_where(m.get('user_frame'))})" if m else ""),
        detail="; ".join(rows) + ".",
        fix="Use DistributedSampler(dataset, drop_last=True) so every rank gets the same number of batches, "
            "or wrap the training loop in `with model.join():`",
        subjects=_subjects(rs), evidence=_evidence(snap, rs))


def _of_len(tdl: dict) -> str:
    """" of N" for a loader with a length; a loader with none (an IterableDataset) says so instead of "of None"."""
    return f" of {tdl['len']}" if tdl.get("len") is not None else " (a loader with no length)"


def _uneven_mismatch(snap, up: dict):
    """RUN005 at a death: the uneven batches first, the collective mismatch they caused folded under them."""
    sec = _run(snap)
    mm = sec.get("mismatch") if _true_mismatch(snap) else None
    short = up["short"]
    rest = sorted(k for k in up["rows"] if k not in short)
    who = _ranks([{"rank": k} for k in short])
    if up["by"] == "length":
        what = (f"{who}'s training loader had {up['rows'][short[0]][0]} batch(es) per epoch, "
                + ", ".join(f"rank {k}'s {up['rows'][k][0]}" for k in rest))
    elif up["by"] == "end":
        what = (f"{who}'s training loader ran out after {up['rows'][short[0]][2]} batch(es) in this epoch, while "
                + ", ".join(f"rank {k}'s had fetched {up['rows'][k][2]} and went on" for k in rest))
    else:
        what = (f"{who} took {up['rows'][short[0]][1]} optimizer step(s) per epoch of the same "
                f"{up['rows'][short[0]][0]}-batch training loader, " + ", ".join(f"rank {k} {up['rows'][k][1]}" for k in rest)
                + " (its last epoch that ended)")
    dead = [r for r in sec.get("ranks") or [] if r.get("end")]
    first = next((r for r in dead if r.get("rank") == (sec.get("death") or {}).get("first_rank")), None)
    died = ""
    if first is not None:
        died = f"; rank {first['rank']} died of it ({first['end'].get('signal') or first['end'].get('how')})"
    if mm:
        parts = "; ".join(f"rank {x['rank']}: {x['op']} shape {x['shape']} {x['dtype'] or ''} at "
                          f"{_where(x.get('user_frame'))}" for x in mm["ranks"])
        rs = [{"rank": x["rank"], "user_frame": x.get("user_frame")} for x in mm["ranks"]]
        then, conseq = f"collective #{mm['seq']} then differed between ranks", f"The collective mismatch is the consequence: {parts}."
    elif up.get("clean_exit"):  # the short rank exited well; the peer died of the lost connection
        exc = ((first or {}).get("end") or {}).get("exception") or {}
        frame = exc.get("user") or (first or {}).get("user_frame")
        rs = [{"rank": k, "user_frame": None} for k in short]
        if first is not None:
            rs.append({"rank": first["rank"], "user_frame": frame})
        then = (f"exited (status 0) while {_ranks([first])} still trained" if first is not None else "exited") + (
            f"; {_ranks([first])} then lost its peer at {_where(frame)}" if first is not None else "")
        conseq = (f"The death is the consequence: {who} finished its shorter epochs and exited; "
                  + (f"{_ranks([first])}, inside its next step's gradient all-reduce, lost the connection "
                     f"({exc.get('type') or 'an error'}: {str(exc.get('message') or '').splitlines()[0][:160] if exc.get('message') else ''})."
                     if first is not None else ""))
        died = ""
    else:  # the peer was in DDP's own gradient all-reduce: no user-level record of its side
        frame = (first or {}).get("end", {}).get("fatal_frame") or ((first or {}).get("end", {}).get("exception") or {}).get(
            "user") or (first or {}).get("user_frame")
        rs = [{"rank": first["rank"], "user_frame": frame}] if first is not None else []
        rs += [{"rank": r.get("rank"), "user_frame": r.get("user_frame")} for r in sec.get("ranks") or []
               if r.get("rank") in rest]
        then = f"its next collective ({_where(frame)}) met its peers' training step's"
        conseq = (f"The death is the consequence: {who}'s collective after its data ended met the gradient all-reduce "
                  "of its peers' next training step.")
        ab = _abort_said((first or {}).get("end") or {})
        if ab is not None:
            conseq += f" It aborted itself: {ab['said']}."
    return error(
        f"uneven batches: {what}: {who} left training early, and {then}{died}",
        detail=(f"{conseq} " + ("" if up.get("clean_exit") else  # runcol27 run-r27 j7: no collective met, it exited
                "The rank with fewer batches ran out of its epoch first and its next collective (an epoch-end or final "
                "gather, a metric's all_reduce) met its peers' next training step's; Gloo aborts on the size difference "
                "(\"Received data size doesn't match\"), NCCL may hang. ") + _uneven_rows(up) + "."),
        fix="Use DistributedSampler(dataset, drop_last=True) so every rank gets the same number of batches, "
            "or wrap the training loop in `with model.join():`",
        subjects=_subjects(rs), evidence={"uneven": {"short": short, "by": up["by"],
                                                     "rows": {str(k): list(v) for k, v in up["rows"].items()}},
                                          "mismatch": mm})


def _uneven_rows(up: dict) -> str:
    """Per rank, what the recorder held of its training loader (the by-end reading says what is unknown in words)."""
    if up["by"] != "end":
        return ("Per rank (training loader length, optimizer steps of its last epoch that ended): "
                + "; ".join(f"rank {k}: {v[0]}, {v[1]}" for k, v in sorted(up["rows"].items())))
    return "Per rank: " + "; ".join(
        f"rank {k}: {v[2]} batch(es) fetched in this epoch, " + ("ran out" if k in up["short"] else "went on")
        + (f", of a {v[0]}-batch loader" if v[0] is not None else ", a loader with no length (an IterableDataset)")
        + ("" if v[1] is None else f", {v[1]} steps in its last whole epoch")
        for k, v in sorted(up["rows"].items()))


@check("RUN006", "collective-mismatch", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def collective_mismatch(snap):
    """Ranks whose collectives of the same sequence number disagree in op, shape or dtype.

    What it checks
        The last user-level collective each rank entered (op, sequence number, shape, dtype and the
        line that called it), at a stall or when a rank died.

    Why it matters
        Collectives pair up by order. When rank 0's third collective is an all_reduce of 11 floats
        and rank 1's is one of 10, Gloo aborts the process (SIGABRT, `op.preamble.length <=
        op.nbytes`) and NCCL may hang or corrupt memory; the peer then fails with "Connection reset
        by peer", which points at the wrong rank.

    Example
        t = torch.ones(10 + rank)
        dist.all_reduce(t)          # rank 0: 10 elements, rank 1: 11

    Fix
        Make every rank call the same collectives in the same order with the same shapes (pad to a
        common size, or all_gather the sizes first).
    """
    sec = _run(snap)
    mm = sec.get("mismatch")
    if not _true_mismatch(snap) or not (sec.get("stall") or sec.get("death")):
        return
    if _uneven_parted(snap) is not None:
        return  # RUN005: the uneven batches are the cause, the mismatch folded under them
    parts = [f"rank {x['rank']}: {x['op']} shape {x['shape']} {x['dtype'] or ''} at {_where(x.get('user_frame'))}"
             for x in mm["ranks"]]
    rs = [{"rank": x["rank"], "user_frame": x.get("user_frame")} for x in mm["ranks"]]
    dead = [r for r in sec.get("ranks") or [] if r.get("end")]
    first = next((r for r in dead if r.get("rank") == (sec.get("death") or {}).get("first_rank")), None)
    died = ""
    if first is not None:
        how = first["end"].get("signal") or first["end"].get("how")
        died = f" (rank {first['rank']} died of it: {how})"
    yield error(f"collective #{mm['seq']} differs between ranks{died}: " + "; ".join(parts),
                detail="The ranks entered their collective number " f"{mm['seq']} with different arguments. "
                       + ("A rank died of it (see the death below, a consequence)." if sec.get("death") else ""),
                fix="Call the same collective with the same shape and dtype on every rank (pad or all_gather sizes first)",
                subjects=_subjects(rs), evidence={"mismatch": mm})


def _cname(c: dict) -> str:
    g = c.get("group_name")
    grp = "the default group" if not c.get("group") else f"group {g}" + (
        f" (ranks {c['group_ranks']})" if c.get("group_ranks") else "")
    return f"{c.get('op')} #{c.get('seq')} of {grp}"


def _parting(rs: List[dict]) -> Optional[dict]:
    """Where the ranks' collective sequences part, from each rank's last collectives (the beacon's
    ring): who waits in which (group, sequence number), who has not called it (behind), and the last
    collective every rank completed. None when fewer than two ranks wait in a collective."""
    waiting = {}
    for r in rs:
        cs = r.get("coll_history") or []
        if r.get("rank") is not None and cs and cs[-1].get("state") == "in":
            waiting[r["rank"]] = cs[-1]
    if len(waiting) < 2:
        return None
    all_ranks = sorted(r["rank"] for r in rs if r.get("rank") is not None)
    keys = {(c.get("group_name"), c.get("seq")) for c in waiting.values()}
    issued = {r["rank"]: {} for r in rs if r.get("rank") is not None}
    done = {}
    for r in rs:
        if r.get("rank") is None:
            continue
        for c in r.get("coll_history") or []:
            g = c.get("group_name")
            issued[r["rank"]][g] = max(issued[r["rank"]].get(g, 0), c.get("seq") or 0)
            if c.get("state") == "done":
                done.setdefault(r["rank"], []).append((g, c.get("seq"), c))
    behind = []
    for r, c in sorted(waiting.items()):
        members = c.get("group_ranks") or all_ranks
        for m in members:
            if m in issued and issued[m].get(c.get("group_name"), 0) < (c.get("seq") or 0):
                behind.append({"rank": m, "waited_by": r, "coll": c, "its_last": issued[m].get(c.get("group_name"), 0)})
    common = None
    for r in all_ranks:
        mine = {(g, q) for g, q, _ in done.get(r, [])}
        common = mine if common is None else common & mine
    last_common = None
    if common:
        cands = [(c.get("t") or 0, c) for g, q, c in done.get(all_ranks[0], []) if (g, q) in common]
        last_common = max(cands, key=lambda x: x[0])[1] if cands else None
    return {"waiting": waiting, "same": len(keys) == 1 and not behind, "behind": behind, "last_common": last_common}


@check("RUN008", "collective-sequence-parted", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def collective_sequence_parted(snap):
    """Ranks wait in collectives that cannot meet (their sequence numbers per process group part), even
    when every Python stack is the same; or every rank waits in the same collective and none is behind.

    What it checks
        At a stall, each rank's last collectives, kept by the recorder: the process group, the
        sequence number in that group, op, size, the line, and whether it completed. Collectives of
        one group pair up by their sequence number: a rank waiting in #N of a group that another member
        has not reached yet waits for that rank (it is behind on that group). It names the ranks
        behind and ahead, the collective where the ranks part (the last one every rank completed, and
        what each called next). When every rank waits in the same collective, no rank is behind: the
        fault is below Python (transport, a peer stuck in native code, a GPU).

    Why it matters
        When every rank shows the same Python stack (all in `dist.all_reduce(t, group=g)`, or all in
        `loss.backward()`), stack dumps cannot tell who is wrong. Collectives issued on several groups
        in a per-rank order (a set or dict iterated in each process's own hash order) deadlock this way.

    Example
        for g in groups if rank == 0 else reversed(groups):   # or: for name in set(names)
            dist.all_reduce(t, group=g)

    Fix
        Issue collectives on every group in the same order on every rank (iterate groups and names in
        a fixed, sorted order). When no rank is behind: read the NCCL Flight Recorder dump
        (TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1) and native stacks
        (py-spy dump --native --pid PID).
    """
    rs = _stalled(snap)
    if not rs or _true_mismatch(snap):
        return
    part = _parting(rs)
    if part is None:
        return
    waiting = part["waiting"]
    byrank = {r["rank"]: r for r in rs if r.get("rank") is not None}
    wr = [byrank[r] for r in sorted(waiting)]
    lines = {(r.get("user_frame") or {}).get("line") for r in wr}
    same_line = len(lines) == 1 and None not in lines
    at = f" at the same line, {_where(wr[0].get('user_frame'))}," if same_line else ""
    lc = part["last_common"]
    after = (f" They parted after {_cname(lc)}, the last collective every rank completed" if lc else
             " They parted at the first user-level collective the recorder saw (none was completed by every rank before)")
    native = _native_hint(rs)
    if part["same"]:
        c = next(iter(waiting.values()))
        if len(waiting) < len(rs) or _setup_wait(snap):
            return  # some rank is elsewhere: RUN001/RUN002/RUN014 say why; at set-up, RUN028
        yield error(f"{_ranks(wr)} all wait in {_cname(c)}{at} and none is behind or ahead: the collective was "
                    "issued by every rank and does not complete",
                    detail=("Every rank has called it (same group, same sequence number, same op); no Python line "
                            "is at fault. The cause is below Python: the transport (network, a firewall, NCCL), a "
                            "peer stuck in native code, or a rank of another node that never reported. "
                            + native),
                    fix="Read the NCCL Flight Recorder dump (export TORCH_FR_BUFFER_SIZE=2000 "
                        "TORCH_NCCL_DUMP_ON_TIMEOUT=1; ddpdoctor triage reads it), NCCL_DEBUG=INFO, and the native "
                        "stacks (py-spy dump --native --pid PID)",
                    subjects=_subjects(wr), evidence=dict(_evidence(snap, rs), parting=part))
        return
    parts = []
    for r in sorted(waiting):
        c = waiting[r]
        not_there = [b["rank"] for b in part["behind"] if b["waited_by"] == r]
        parts.append(f"rank {r} waits in {_cname(c)}" + (
            f", which {_ranks([{'rank': x} for x in not_there])} {'has' if len(not_there) == 1 else 'have'} not "
            f"called" if not_there else ""))
    nxt = []
    for r in sorted(waiting):
        cs = byrank[r].get("coll_history") or []
        idx = -1 if lc is None else next((i for i, c in enumerate(cs) if c.get("group_name") == lc.get("group_name")
                                          and c.get("seq") == lc.get("seq")), None)
        if idx is not None and idx + 1 < len(cs):
            nxt.append(f"rank {r} {_cname(cs[idx + 1])}")
    behind = "; ".join(sorted({f"rank {b['rank']} on {_cname(b['coll']).split(' of ', 1)[1]} (its last there: #{b['its_last']})"
                               for b in part["behind"]}))
    yield error(f"{_ranks(wr)} wait{at} in collectives that cannot meet: " + "; ".join(parts),
                detail=("Collectives of a process group pair up by their sequence number in that group. "
                        f"Behind: {behind}." + after +
                        (f"; next, {', '.join(nxt)}." if nxt else ".") + " " + native),
                fix="Call the collectives of every process group in the same order on every rank (iterate groups "
                    "or names in a fixed, sorted order, never a per-process set or dict order)",
                subjects=_subjects(wr), evidence=dict(_evidence(snap, rs), parting=part))


def _native_hint(rs: List[dict]) -> str:
    if any(r.get("native") for r in rs):
        return "Native frames (py-spy) are in the report's stacks."
    return ("For native frames: pip install 'ddpdoctor[native]' (py-spy) and ddpdoctor run adds them at a stall; "
            "or py-spy dump --native --pid PID on the node.")


def _setup_wait(snap) -> Optional[str]:
    """Every live rank of a stall at step 0 (no backward ended) in the same set-up wait: 'collective' (the same
    collective: group, sequence number, op) or 'ddp-init' (DDP's constructor); None otherwise."""
    sec = _run(snap)
    rs = _stalled(snap)
    if len(rs) < 2 or any(r.get("end") for r in sec.get("ranks") or []) or any((r.get("step") or 0) > 0 for r in rs):
        return None
    if any(not r.get("alive", True) for r in sec.get("ranks") or []):
        return None
    states = {r.get("state") for r in rs}
    if states == {"ddp-init"}:
        return "ddp-init"
    if states == {"rendezvous"} and _never_joined(rs):
        return "rendezvous"
    if states == {"collective"}:
        keys = {((r.get("last_collective") or {}).get("group"), (r.get("last_collective") or {}).get("seq"),
                 (r.get("last_collective") or {}).get("op")) for r in rs}
        return "collective" if len(keys) == 1 else None
    return None


def _world_of(rs) -> int:
    sizes = [str((r.get("framework") or {}).get(k) or "") for r in rs for k in ("pg_world", "env_world")]
    sizes += [str(r.get("world") or "") for r in rs]  # the recorder's, at init_process_group
    return max((int(w) for w in sizes if w.isdigit()), default=0)


def _never_joined(rs) -> list:
    """The ranks of the world (its size as the ranks recorded it at init_process_group) with no process among `rs`:
    the ones that never called init_process_group here (a rank alive before it is RUN004's, one that died RUN010's)."""
    world = _world_of(rs)
    have = {r.get("rank") for r in rs}
    if not world or any(not isinstance(x, int) for x in have):
        return []
    return [x for x in range(world) if x not in have]


def _rendezvous_wait(rs, d: dict) -> tuple:
    """(title words, detail words) for ranks that wait in init_process_group's rendezvous for ranks that never came:
    who never arrived, and what the others wait on (data/setup_hang.json "rendezvous", torch's rendezvous.py)."""
    world, missing = _world_of(rs), _never_joined(rs)
    k = d["rendezvous"]
    on = k["rank0_missing"] if 0 in missing else k["other_missing"].format(world=world)
    hosts = sorted({r.get("host") for r in rs if r.get("host")})
    here = f" on {hosts[0]}" if len(hosts) == 1 else " on these nodes"
    title = (f"{_ranks(rs)} wait in init_process_group's rendezvous for {_ranks([{'rank': x} for x in missing])}, "
             f"which never arrived (no process of {'it' if len(missing) == 1 else 'them'}{here}): {on}")
    detail = (f"{k['meaning']} {_ranks(rs)} wait: {on}; {k['barrier'].format(world=world)}. "
              f"{_ranks([{'rank': x} for x in missing])} of the world's {world} ranks never called init_process_group "
              f"here: it was not started, or ended before it (its launcher's log says which), or runs on another "
              f"node that is not there yet.")
    return title, detail


@check("RUN028", "stall-at-setup", family=FAMILY, when=("run",), needs=("run",), catalogue=("A4", "C3"))
def stall_at_setup(snap):
    """Every rank waits in the same set-up step before the first training step, and none works: a set-up hang.

    What it checks
        At a stall before the job's first step (no optimizer step, no backward ended), every rank
        in the same wait: the same collective (one group, sequence number and op: a first barrier,
        a broadcast of the config) entered by all and completed by none, or DDP's constructor (its
        broadcast of rank 0's parameters and its shape check across ranks). It names the wait, the
        line, how many ranks of the world this node sees, and what to read (ddpdoctor/data/
        setup_hang.json, from torch's documentation). Every rank here inside init_process_group's
        rendezvous with ranks of the world absent: it names the ranks that never arrived and what
        the others wait on (rank 0's TCPStore, from torch's rendezvous.py).

    Why it matters
        No rank is behind: every stack is the same and nobody is a straggler. The ranks cannot reach
        each other (the network interface the backend picked, a firewall, a MASTER_ADDR another node
        cannot reach) or a rank of another node has not come. The job burns its allocation until
        the process group's timeout and then fails with an error that names no cause.

    Example
        torchrun --nnodes 2 ... on hosts whose default interface is a docker bridge: every rank waits
        in DDP(model)'s first broadcast.

    Fix
        Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface that routes between the nodes,
        open the ports between them, check MASTER_ADDR from every node, and rerun with NCCL_DEBUG=INFO.
    """
    wait = _setup_wait(snap)
    if wait is None:
        return
    sec = _run(snap)
    rs = _stalled(snap)
    d = setup_hang.data()
    r0 = rs[0]
    if wait == "rendezvous":
        title, detail = _rendezvous_wait(rs, d)
        missing = _never_joined(rs)
        # torchrun starts a node's ranks together: with fewer ranks missing than are here, they never came; as many
        # or more may be another node's share still starting (a guess: said as a warning)
        yield (error if len(missing) < len(rs) else warning)(title, detail=detail,
                    fix="# start every rank of the world, and each must reach init_process_group:\n"
                        f"# the launcher's log for rank(s) {', '.join(map(str, missing))} (did it start? did it exit?)\n"
                        "echo $WORLD_SIZE $MASTER_ADDR $MASTER_PORT   # the same on every rank; --nproc-per-node x "
                        "--nnodes = WORLD_SIZE\nnc -zv $MASTER_ADDR $MASTER_PORT   # rank 0's store answers",
                    subjects=_subjects(rs) + [f"rank:{x}" for x in missing],
                    evidence=dict(_evidence(snap, rs), wait=wait, world=_world_of(rs), never_arrived=missing))
        return
    what = d["waits"][wait] + (f" ({_cname(r0.get('last_collective') or {})})" if wait == "collective" else "")
    sizes = [str((r.get("framework") or {}).get(k) or "") for r in rs for k in ("pg_world", "env_world")]
    sizes += [str(r.get("world") or "") for r in rs]  # the recorder's, at init_process_group
    world = max((int(w) for w in sizes if w.isdigit()), default=0)
    hosts = sorted({r.get("host") for r in rs if r.get("host")})
    seen = (f"This node sees {len(rs)} of the world's {world} ranks: the others run elsewhere, and one of them not "
            f"there yet (still starting, or failed) holds every rank here; their node's log says which. "
            if world > len(rs) else f"Every rank of the world ({len(rs)}) is here{f' (on {hosts[0]})' if len(hosts) == 1 else ''} and waits: none is behind. "
            if world else f"This node sees {len(rs)} rank(s); the world's size was not recorded. ")
    lines = {_where(r.get("user_frame")) for r in rs}
    at = f" at {next(iter(lines))}" if len(lines) == 1 else ""
    idle = (sec.get("stall") or {}).get("idle_s") or 0
    yield (warning if world > len(rs) else error)(
        f"{_ranks(rs)} all wait at set-up, before the first step, in {what}{at}, for {idle:.0f} s: a set-up hang "
        "(the ranks do not reach each other), not a straggler",
        detail=seen + "Causes, in the order to check: " + "; ".join(d["causes"]) + ". Read: " + "; ".join(d["read"])
        + ". " + _native_hint(rs),
        fix="export GLOO_SOCKET_IFNAME=<the interface that routes between the nodes>  # NCCL_SOCKET_IFNAME for NCCL; "
            "the same MASTER_ADDR on every node, reachable from each (nc -zv $MASTER_ADDR $MASTER_PORT); rerun with "
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET",
        subjects=_subjects(rs), evidence=dict(_evidence(snap, rs), wait=wait, world=world))


@check("RUN026", "stall-in-teardown", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def stall_in_teardown(snap):
    """A rank's code has returned, and the rank hangs in its shutdown instead of exiting.

    What it checks
        At a stall, ranks whose stack shows that their code returned: the script's module frame is
        still at the line that called the job's function (`main()`, recorded at init_process_group)
        with no frame of that function inside it, so the function returned and the rank frees its
        objects; or no module frame is left, so the script ran to its end and the interpreter shuts
        down (joining non-daemon threads, exit handlers). It names what the stack shows, from
        ddpdoctor/data/teardown.json (CPython's and torch's source): a non-daemon thread joined by
        threading._shutdown, torch's Gloo process group destroyed with the GIL held (native frames).

    Why it matters
        The training is over but the job does not end: it holds its nodes until the scheduler's time
        limit, and a hang reported at `main()` looks like the training's own. The place to fix is the
        end of main(), not the training loop.

    Example
        main() returns on rank 1 while a thread it started without daemon=True still runs, or while
        its DDP model (Reducer) is the process group's last reference under Gloo.

    Fix
        End main() cleanly on every rank: stop and join (or make daemon) the threads it started, free
        every DDP-wrapped model (and the Trainer holding one) and then `dist.barrier();
        dist.destroy_process_group()`. `py-spy dump --native --pid PID` shows the C frames a
        destructor waits in.
    """
    rs = _stalled(snap)
    down = [r for r in rs if r.get("state") == "teardown" or (r.get("teardown") or {}).get("how") == "after-exit"]
    if not down:
        return
    if any(x.get("state") in ("collective", "backward", "ddp-forward") for x in rs if x not in down):
        return  # another rank waits for it in a collective it left without: that collective is the fault (RUN001)
    r = down[0]
    td = r.get("teardown") or {}
    frames = [{"file": f.get("file"), "func": f.get("func")} for f in [td.get("inner") or {}] if f]
    known = teardown.hang_of(frames, "\n".join(str(x.get("native") or "") for x in down))
    past = teardown.after_exit() if td.get("how") == "after-exit" else {}
    if td.get("how") == "returned":
        how = (f"{td.get('func')}() returned at {_short(td.get('file'))}:{td.get('line')} and the rank frees its "
               "objects")
    elif past:
        how = f"{past['known']}; the interpreter shuts down"
    else:
        how = "its script ran to its end and the interpreter shuts down"
    inner = td.get("inner")
    at = (f"; innermost frame {_short(inner.get('file'))}:{inner.get('line')} in {inner.get('func')}" if inner else
          "" if past else "; no Python frame inside that line: a destructor in C (no Python frame of its own)")
    others = [x for x in rs if x not in down]
    done = [x for x in _run(snap).get("ranks") or [] if not x.get("alive", True) and not x.get("end")]
    rest = ((f"; {_ranks(others)}: " + ", ".join(sorted({x.get('doing') or x.get('state') for x in others})))
            if others else "") + (f"; {_ranks(done)} finished and exited" if done else "")
    if known.get("entry"):
        gloo = next((e for e in teardown.entries() if e.get("id") == known["entry"]), {})
        what, fix = known["what"], gloo.get("fix") or ""
    elif known:
        what, fix = known["what"], known["fix"]
    elif past:
        what = (f"What it waits in is not known (no stack past the exit handler). Where it is: {past['what']}. A "
                "guess, to be confirmed with its native stack: " + (
                    f"under Gloo, {teardown.hangs()[-1]['what']}" if td.get("pg_alive") is not False else
                    "its process group was destroyed before its exit handler, so not torch's process-group teardown: "
                    "a finalizer (a `__del__`, a weakref callback) or an exit handler registered before ddpdoctor's"))
        fix = past["fix"].replace("PID", str(r.get("pid")))
    else:
        what = ("what it waits in is not in its Python stack. A guess, to be confirmed with its native stack: "
                + (f"under Gloo, {teardown.hangs()[-1]['what']}" if td.get("how") == "returned" else
                   "an exit handler or a library's finalizer waiting for a thread or a peer"))
        fix = ("py-spy dump --native --pid " + str(r.get("pid")) + "   # the C frames it waits in; then end main() "
               "cleanly: stop and join the threads it started, `del trainer, model; gc.collect()`, then "
               "`dist.barrier(); dist.destroy_process_group()` on every rank")
    yield error(f"{_ranks(down)} hang{'s' if len(down) == 1 else ''} after its code returned: {how}, and it has not "
                "exited",
                detail=f"{what}{at}{rest}. The training's work is over; the job ends only when this rank exits.",
                fix=fix, subjects=_subjects(down),
                evidence=dict(_evidence(snap, rs), teardown={str(x.get("rank")): x.get("teardown") for x in down},
                              known=known.get("id")))


WAITS = ("collective", "backward", "ddp-forward")


@check("RUN027", "stall-rank-left-alone", family=FAMILY, when=("run",), needs=("run",), catalogue=("F8", "C3"))
def rank_left_alone(snap):
    """A rank still running alone after every other rank finished its work and exited cleanly.

    What it checks
        At a stall, the live ranks when every other rank has exited cleanly (no exception, no
        signal: its script ran to its end). A lone rank in a collective (a call of its own, DDP's
        gradient all-reduce in backward, DDP's forward sync) waits for ranks that are gone: it names
        it, the line, and the cause its facts show against the exited ranks' (ddpdoctor/data/
        left_alone.json, from torch's source): more batches (uneven data), more steps, or an extra
        call after the others' last collective; a guess, said as such, when none shows. A lone rank
        outside any collective (asleep, blocked or computing in its own code) is named with its line,
        its step against theirs, and whether the ranks exchanged anything at all.

    Why it matters
        The other ranks' clean exits explain the stall: nothing will join the lone rank's
        collective, and with Gloo nothing fails until the process group's timeout (30 minutes by
        default); the job holds its nodes until then. Without the exits in view it looks like a
        hang with no cause.

    Example
        shard = data[rank::world]        # rank 0 has one batch more than rank 1
        for x, y in DataLoader(shard):   # rank 1 runs out and exits; rank 0 waits in backward
            model(x).sum().backward()

    Fix
        Give every rank the same number of batches and steps (DistributedSampler(drop_last=True), or
        `with model.join():`), and the same collectives; a rank that runs alone in its own code:
        bound what it waits for (the line named).
    """
    sec = _run(snap)
    rs = _stalled(snap)
    if not rs or sec.get("extra_collective") or any(r.get("state") == "teardown" or r.get("teardown") for r in rs):
        return  # RUN001 (a collective only it issued, under a rank condition) / RUN026 (its code returned)
    ranks = sec.get("ranks") or []
    if any(r.get("end") for r in ranks):
        return  # a rank failed: RUN010 and its consequences
    exited = [r for r in ranks if not r.get("alive", True) and r not in rs]
    if not exited:
        return
    for fn in (collective_not_called_by_all, rank_outside_collective, dataloader_worker, rank_still_starting,
               uneven_batches, collective_mismatch, rank_busy, collective_sequence_parted):
        if list(fn(snap) or ()):
            return
    lone = rs[0]
    gone = f"{_ranks(exited)} finished and exited cleanly"
    steps = max((r.get("step") or 0) for r in exited)
    at_steps = f"{_ranks([lone])} is at step {lone.get('step') or 0}; {_ranks(exited)} ended at step {steps}"
    ev = dict(_evidence(snap, rs), exited={str(r.get("rank")): {"step": r.get("step"), "dataloader": r.get("dataloader"),
                                                                "collectives": r.get("collectives")} for r in exited})
    if all(r.get("state") in WAITS for r in rs):
        cid = left_alone.cause_of(lone, exited)
        c = left_alone.cause(cid) if cid else {}
        dl = lone.get("dataloader") or {}
        facts = (f"{at_steps}; batches fetched: " + ", ".join(
            f"rank {r.get('rank')} {(r.get('dataloader') or {}).get('n')} of {(r.get('dataloader') or {}).get('len')}"
            for r in [lone] + exited) + f"; collectives issued: " + ", ".join(
            f"rank {r.get('rank')} {r.get('collectives') or 0}" for r in [lone] + exited) + "."
            if dl else f"{at_steps}.")
        why = (f"Cause: {c['what']}." if c else
               "Its facts (batches, steps, collectives) match the others': a guess, to be confirmed at its line: "
               "a call only this rank makes after the others' last (an evaluation or a save after the loop that "
               "runs a collective), or a loop that ends by a per-rank condition.")
        yield error(f"{_ranks(rs)} wait{'s' if len(rs) == 1 else ''} alone in {lone.get('doing')} at "
                    f"{_where(lone.get('user_frame'))}, which no rank will join: {gone}",
                    detail=f"{facts} {why} A collective needs every rank of its group; with Gloo nothing fails "
                           f"until the process group's timeout ({lone.get('pg_timeout_s') or 1800:.0f} s).",
                    fix=c.get("fix") or "Make every rank call the same collectives the same number of times (the "
                        "evaluation / save on every rank, the same stop condition everywhere), and end with a "
                        "dist.barrier() on every rank",
                    subjects=_subjects(rs), evidence=dict(ev, cause=cid))
        return
    exchanged = any(r.get("coll_history") or r.get("collectives") for r in ranks) or any(
        (r.get("framework") or {}).get("ddp") for r in ranks)
    alone = ("" if exchanged else " The ranks exchanged no collective (no DDP gradient sync, no collective call "
             "recorded): each ran on its own, so nothing made the others wait for it.")
    busy = lone.get("state") == "busy"
    cpu = lone.get("cpu_frac")
    use = f" ({100 * cpu:.0f}% of a core)" if isinstance(cpu, (int, float)) else ""
    what = (f"it computes{use}: work, which may yet end" if busy else
            f"it uses no CPU{use}: it waits on something of its own (a sleep, a lock, I/O, a child process)")
    yield (warning if busy else error)(
        f"{_ranks(rs)} {'runs' if len(rs) == 1 else 'run'} alone, {lone.get('doing')} at "
        f"{_where(lone.get('user_frame'))}, after {gone}: the job ends only when {'it does' if len(rs) == 1 else 'they do'}",
        detail=f"{at_steps}; {what}.{alone} No rank waits for it, so no timeout will end it.",
        fix=f"Find why {_where(lone.get('user_frame'))} does not return on {_ranks(rs)} (its stack is in "
            "`--report FILE`) and bound it (a timeout on the read or the lock, a time limit on the work)",
        subjects=_subjects(rs), evidence=ev)


@check("RUN007", "stall-unexplained", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def stall_unexplained(snap):
    """No rank has made progress for --stall-after seconds, and no specific cause was recognised.

    What it checks
        At a stall that none of RUN001–RUN006 explains: what each group of ranks is doing and its
        innermost line of your code, so the odd one out is visible.

    Why it matters
        A job that makes no progress burns its allocation until the timeout; the groups show where
        to look.

    Example
        Every rank waits in the same all_reduce, because a rank on another node died.

    Fix
        Compare the groups' lines; the rank whose line differs is the one to look at. Run again with
        --on-stall stop to end the job cleanly once it is reported.
    """
    sec = _run(snap)
    rs = _stalled(snap)
    if not rs:
        return
    for fn in (collective_not_called_by_all, rank_outside_collective, dataloader_worker, rank_still_starting,
               uneven_batches, collective_mismatch, rank_busy, collective_sequence_parted, stall_in_teardown,
               rank_left_alone, stall_at_setup):
        if list(fn(snap) or ()):
            return
    groups = _groups(rs)
    parts = [f"{_ranks(g)}: {g[0].get('doing')} at {_where(g[0].get('user_frame'))}" for _, g in groups]
    # ranks that already finished cleanly (no failure of theirs): the job ends only when the stalled ones do
    done = [r for r in sec.get("ranks") or [] if not r.get("alive", True) and not r.get("end") and r not in rs]
    if done:
        parts.append(f"{_ranks(done)} finished and exited")
    yield warning(f"no rank made progress for {(sec.get('stall') or {}).get('idle_s', 0):.0f} s; "
                  + "; ".join(parts),
                  detail="Ranks grouped by what they do and their innermost line of your code."
                         + (f" {_ranks(done)} ran to its end and exited cleanly: the job ends only when "
                            f"{_ranks(rs)} do{'es' if len(rs) == 1 else ''}." if done else ""),
                  fix="Look at the group whose line differs from the others; `--report FILE` has every stack",
                  subjects=_subjects(rs), evidence=_evidence(snap, rs))


def _exit_aborts(sec: dict) -> List[dict]:
    """The ranks that died by a signal while shutting down, when no rank failed on its own before
    (the others' ends, if any, are consequences: torchrun's SIGTERM, a lost peer). Else []."""
    dead = [r for r in sec.get("ranks") or [] if r.get("end")]
    if any(not r["end"].get("secondary") for r in dead):
        return []  # a real failure (RUN010/RUN011); an abort at exit is one of its consequences
    return [r for r in dead if r["end"].get("at_exit")]


def _first_death(snap) -> Optional[dict]:
    sec = _run(snap)
    d = sec.get("death")
    if not d or d.get("tied"):
        return None
    if d.get("first_pid") is not None:
        return next((r for r in sec.get("ranks") or [] if r.get("end") and r.get("pid") == d["first_pid"]), None)
    return next((r for r in sec.get("ranks") or [] if r.get("end") and r.get("rank") == d.get("first_rank")), None)


def _who(r: dict) -> str:
    # a process that raised inside init_process_group before it knew its rank (RANK unset...)
    return f"rank {r['rank']}" if r.get("rank") is not None else \
        f"process {r.get('pid')} (rank unknown, in init_process_group)"


def _how(end: dict) -> str:
    """How one rank ended, in words: its exception, its signal and who sent it, its exit code."""
    exc = end.get("exception") or {}
    if end["how"] == "exception":
        msg = (exc.get("message") or "").strip().splitlines()
        return f"raised {exc.get('type') or 'an exception'}: {msg[0][:200] if msg else ''}"
    by = end.get("terminated_by")
    if by:
        after = ", ".join(f"rank {x}" for x in by.get("after_ranks") or [] if x is not None)
        sig = end.get("signal") or by.get("signal")
        return (f"was ended by {sig} from {by['who']}'s teardown" +
                (f" after {after} failed" if after else f" ({by.get('reason')})" if by.get("reason") else ""))
    if end["how"] == "signal":
        return f"was killed by {end.get('signal')}"
    if end["how"] == "vanished":
        return "disappeared without an exception, a fatal-signal record or a known exit status (SIGKILL or another uncatchable end)"
    return f"exited with code {end.get('exit_code')}"


WHY = {"cuda-oom": "CUDA ran out of memory", "cpu-oom": "a memory allocation failed: out of host memory",
       "nccl": "a NCCL error", "peer-lost": "its connection to a peer ended: the peer's end came first"}


def _order_text(sec: dict, first: Optional[dict], as_ends: bool = False) -> str:
    """Root cause first, then the consequences in the order they came, with how each ended. `as_ends`: the same list
    told as "The ends, in order: ... Then: ...", for findings whose root cause is not one of these ends."""
    dead = {r.get("pid"): r for r in sec.get("ranks") or [] if r.get("end")}
    ordered = sorted(dead.values(), key=lambda r: (r is not first, r["end"].get("secondary", False),
                                                   r["end"].get("t") if r["end"].get("t") is not None else float("inf")))
    t0 = first["end"].get("t") if first is not None else None
    parts, own = [], []
    for r in ordered:
        dt = r["end"].get("t")
        when = f", {dt - t0:+.2f} s" if t0 is not None and dt is not None and r is not first else ""
        at = f", at {_where(r.get('user_frame'))}" if r is not first and r.get("user_frame") else ""
        text = f"{_who(r)} ({_how(r['end'])}{when}{at})"
        # a later rank that failed of itself (its own exception, not a lost peer's: section.end_of) is no consequence
        (own if (not as_ends and r is not ordered[0] and not r["end"].get("secondary")) else parts).append(text)
    if not parts:
        return ""
    head = ("The ends, in order: " if as_ends else "Root cause: ") + parts[0] + "."
    also = " Also failed of itself, later (not a consequence): " + "; ".join(own) + "." if own else ""
    then = " Then: " if as_ends else " Then, consequences of it: "
    return head + also + (then + "; ".join(parts[1:]) + "." if len(parts) > 1 else "") + _same_error(dead.values())


def _same_error(ends) -> str:
    """Every failed rank raised the same exception at the same line: the script's error, not one rank's."""
    keys = {((r["end"].get("exception") or {}).get("type"), ((r["end"].get("exception") or {}).get("message") or "")[:200],
             _where((r["end"].get("exception") or {}).get("user")) if (r["end"].get("exception") or {}).get("user") else None)
            for r in ends}
    if len(keys) != 1 or len(list(ends)) < 2:
        return ""
    typ, _msg, where = next(iter(keys))
    if not typ or any(r["end"].get("how") != "exception" for r in ends):
        return ""
    return (f" Every rank that failed raised the same {typ}" + (f" at {where}" if where else "") +
            ": the script's error, which every rank reaches (fix it once; no rank caused it in another).")


def _never_arrived(sec: dict, late: dict):
    """RUN010 when the first death is a collective's timeout and a rank never came to that collective:
    the rank held outside is the root cause, the timeout (and torchrun's teardown) its consequences."""
    recs = {r.get("rank"): r for r in sec.get("ranks") or []}
    held = [recs.get(x["rank"]) or x for x in late["late"]]
    waiters = [recs[w] for w in late["waiters"] if w in recs]
    one = late["late"][0]
    where = _where(one.get("user_frame")) if one.get("user_frame") else "a line not recorded"
    out = "outside any collective" if one.get("where") == "outside" else "before its process group" if \
        one.get("where") == "start" else "behind in the collective sequence"
    behind = (f"; it had issued {one['collectives']} collective call(s), {_ranks(waiters)} "
              f"{late['waiter_collectives']}") if one.get("behind") else ""
    tmo = f" ({late['timeout_s']:g} s)" if isinstance(late.get("timeout_s"), (int, float)) else ""
    step = f" at step {late['waiter_step']}" if late.get("waiter_step") else ""
    title = (f"{_ranks(held)} never reached the collective {_ranks(waiters)} waited in{step}: it was {out}, "
             f"at {where}{behind}, until the process group's timeout{tmo} ended {_ranks(waiters)}")
    first = waiters[0] if waiters else None
    detail = (f"Root cause: {_ranks(held)}, held {out} ({where}). {_ranks(waiters)} waited for it in a collective "
              f"and timed out: a consequence, not the cause. " + _order_text(sec, first, as_ends=True))
    exc = ((first or {}).get("end") or {}).get("exception") or {}
    if exc.get("traceback"):
        detail += "\n" + "\n".join(str(exc["traceback"]).strip().splitlines()[-6:])
    fix = (f"Find why {_ranks(held)} was held at {where} (a sleep, slow I/O or storage, a lock, work only it does) "
           f"and keep it under the timeout{tmo}, or make every rank do that work; raise the timeout "
           "(init_process_group(timeout=...)) only for work that must take that long")
    subj = [f"rank:{x['rank']}" for x in late["late"] if x.get("rank") is not None]
    if one.get("user_frame"):
        subj.append(f"line:{one['user_frame']['line']}")
    return error(title, detail=detail.strip(), fix=fix, subjects=subj,
                 evidence={"never_arrived": late, "order": (sec.get("death") or {}).get("order")})


@check("RUN010", "rank-died", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def rank_died(snap):
    """The first rank that died, how (exception and line, signal and who sent it, exit code) and why.

    What it checks
        Every rank that ended badly, from each rank's real end: its exception (and its time), its
        fatal-signal dump, its exit status (torchrun's agent records the workers' exit codes and
        which workers it ended after another failed), the code given to os._exit, the elastic error
        file. Root causes come before consequences (a rank torchrun terminated, a peer that lost its
        connection), then the first in time; never the lower rank number. Two ranks whose ends are
        known only to the poll (0.2 s; up to 1 s apart in a steady job) and came together are
        reported as a tie. A failed allocation
        (CUDA or host) is out of memory; a SIGKILL is explained where the node says why (see RUN011).

    Why it matters
        When one rank dies, its peers fail a moment later with errors about the lost peer, and
        torchrun's "Root Cause (first observed failure)" orders ranks by exit; it can name a peer.

    Example
        rank 1 raised ValueError at train.py:41; rank 0 then failed with "Connection closed by peer".

    Fix
        Fix the first failure; the later ones go away with it.
    """
    sec = _run(snap)
    d = sec.get("death") or {}
    if d.get("tied"):
        tied = [r for r in sec.get("ranks") or [] if r.get("end") and r.get("rank") in d["tied"]]
        hows = "; ".join(f"{_who(r)} {_how(r['end'])}" for r in tied)
        yield error(f"{_ranks(tied)} ended within {0.3:.1f} s of each other and nothing recorded which came first: {hows}",
                    detail="Nothing recorded orders them: an end known only from a poll or the launcher's record lies "
                           "somewhere between the last time its process was seen running and that record, and the other "
                           "end falls inside that interval; each is listed with its evidence. " + _order_text(sec, None),
                    fix="Look at each rank's own log and at the node (dmesg -T | tail -50; the scheduler's log) for "
                        "what ended them",
                    subjects=_subjects(tied), evidence={"tied": d["tied"], "ends": {str(r.get("rank")): r["end"] for r in tied}})
        return
    if sec.get("extra_collective"):
        return  # RUN001: a collective only some ranks call; the timeouts and lost peers are its consequences
    if d.get("never_arrived"):
        yield _never_arrived(sec, d["never_arrived"])
        return
    r = _first_death(snap)
    if r is None:
        return
    end = r["end"]
    if _uneven_parted(snap) is not None:
        return  # RUN005: the rank ran out of data; its death at the next collective is the consequence
    if _true_mismatch(snap) and end.get("how") != "exception":
        return  # RUN006 is the root cause (Gloo aborts the rank: SIGABRT, or it vanishes before the dump)
    if end.get("why") == "oom-killer":
        return  # RUN011
    if _exit_aborts(sec):
        return  # RUN013: the first failure came while a rank shut down, after its work
    stop = _stopped_from_outside(sec, r)
    if stop is not None:
        yield stop
        return
    if end.get("ours"):
        return  # ddpdoctor's own code raised it in the rank: DOC004 (commands/run.py own_failures), no rank to blame
    exc = end.get("exception") or {}
    mismatch = _model_mismatch(sec) if model_mismatch.is_mismatch(str(exc.get("message") or "")) else None
    if mismatch is not None:
        yield mismatch
        return
    frame = exc.get("user") or end.get("fatal_frame") or r.get("user_frame")
    last_seen = None
    if frame is None and (r.get("last_collective") or {}).get("line"):
        file, _, n = str(r["last_collective"]["line"]).rpartition(":")
        last_seen = {"file": file, "line": int(n), "func": ""} if n.isdigit() else None
    frame_d = frame if frame is None or "code" in frame else dict(frame, code=None)
    how = _how(end)
    why = WHY.get(end.get("why"))
    kill = end.get("kill") or {}
    step = f" at step {r.get('step')}" if r.get("step") else ""
    who = _who(r)
    # where it died is known from its exception, its fatal dump or a stack taken at its end; a rank killed with none
    # of them (SIGKILL leaves no stack) has only the line the recorder saw last: said as that, not as where it died
    seen_only = frame_d is not None and not (exc.get("user") or end.get("fatal_frame") or r.get("stack"))
    place = None if exc.get("user") or end.get("fatal_frame") or r.get("stack") else _killed_place(r, end)
    title = f"{who} died first{step}: {how}" + (f" ({why})" if why else "") + \
        (f"; {kill['text']}" if kill.get("text") else "") + \
        (place if place else (_seen_line(r, frame_d, end) if seen_only else f", at {_where(frame_d)}") if frame_d else "") + \
        (f"; its last collective ({r['last_collective'].get('op')} #{r['last_collective'].get('seq')}) came from "
         f"{_where(last_seen)}" if last_seen else "")
    detail = _order_text(sec, r) + " " + (f"Last RSS of {who}: {r['end'].get('rss_mb')} MiB. " if r["end"].get("rss_mb") else "")
    if end.get("spawn_line"):
        detail += f"\nThe mp.spawn parent said: {end['spawn_line']}"
    if kill.get("evidence"):
        detail += f"\nEvidence: {kill['evidence']}"
    if kill.get("read"):
        detail += f"\nNothing on this node said why. To find out, on {r.get('host') or 'that node'}: {kill['read']}"
    if exc.get("traceback"):
        detail += "\n" + "\n".join(str(exc["traceback"]).strip().splitlines()[-12:])
    fix = {"cuda-oom": "Lower the per-device batch size or enable gradient checkpointing; check other processes on the GPU (nvidia-smi)",
           "cpu-oom": "Lower the memory the rank needs (smaller batch or sequence length, fewer DataLoader workers, a "
                      "memory-mapped dataset) or give the job more memory; the size it asked for is in the message",
           "nccl": "Re-run with NCCL_DEBUG=INFO and check the interface and transport (ddpdoctor check)",
           "peer-lost": "Read the log of the peer it names (its host and port): that rank ended first, and its own "
                        "error is the cause"}.get(end.get("why"))
    if fix is None and kill.get("fix"):
        fix = kill["fix"]
    ab = _abort_said(end)
    if ab is not None:
        title += f"; it aborted itself: {ab['said']}"
        detail += f"\n{ab['detail']}"
        fix = fix or ab["fix"]
    elif fix is None and end.get("signal") == "SIGABRT" and not kill.get("text"):
        fix = (f"SIGABRT is raised by the process itself (abort(): an uncaught C++ exception, a failed assert, a heap "
               f"check): read what {who} printed on stderr just before its end (`terminate called after throwing`, "
               "`Assertion ... failed`) and fix that")
    if fix is None:
        fix = (f"Fix the error at {_where(frame_d)} on {who}" if end["how"] == "exception" and frame_d else
               f"Find who sent {end.get('signal')} to {who} (dmesg, the scheduler's log)"
               if end["how"] in ("signal", "vanished") else f"See why {who} exited with {end.get('exit_code')}")
    yield error(title, detail=detail.strip(), fix=fix, subjects=_subjects([dict(r, user_frame=frame_d or last_seen)]),
                evidence={"rank": r["rank"], "pid": r.get("pid"), "host": r.get("host"), "end": end,
                          "order": d.get("order"), "last_collective": r.get("last_collective")})


def _abort_said(end: dict) -> Optional[dict]:
    """RUN010's words for a rank that aborted itself, from the abort messages the supervisor read in the job's stderr
    (end["abort"]: facts.aborts over data/abort_texts.json). The newest message is taken as this rank's when one rank
    aborted; with several aborting ranks the messages are listed as the job's, unattributed."""
    ab = end.get("abort") or {}
    rs = ab.get("reasons") or []
    if not rs or end.get("signal") != "SIGABRT":
        return None
    from ..facts import aborts

    last = rs[-1]
    one = (ab.get("aborted") or 1) == 1
    said = aborts.text(last) + ("" if one else " (the job's stderr; several ranks aborted, not told apart)")
    detail = ("Its stderr, just before the end: " + " | ".join(aborts.text(r) for r in rs) + ". " + last["meaning"]
              + " SIGABRT is raised by the process itself (abort()), not sent to it.")
    fix = last.get("fix") or (f"Fix what it printed: {aborts.text(last)}" if last.get("what") or last["id"] ==
                              "glibc.assert_fail" else "Read the lines it printed before the abort")
    return {"said": said, "detail": detail, "fix": fix}


# A rank's last recorded place is said as a guess when its last step ended longer before its end than this many of its
# mean steps, plus PLACE_SLACK_S (a SIGKILL's end is seen by the parent's poll, ~0.2 s late and more under load):
# then it may have left the step loop (a checkpoint, an evaluation without a DataLoader) after what the beacon holds.
PLACE_STEPS = 2
PLACE_SLACK_S = 0.5


def _killed_place(r: dict, end: dict):
    """RUN010's words for where a rank with no stack at its end (SIGKILL leaves none) was, when its beacon holds its
    phase in a step: fetching a batch ("data"), between steps (the optimizer hook's "between" byte, beacon.PHASES: after
    its optimizer step, before the next batch), or in the step's work after its batch ("run" with no write since the
    byte was overwritten by the batch; forward, backward and the optimizer are not told apart on an unsampled step,
    whose hooks are not installed), the step it was in (its steps done + 1), and the user's line that
    started its loop over the loader (recorder._loader_origin, read once per loader). The last recorded place, said
    as that; a guess when the last step's end is older than PLACE_STEPS steps (or unknown). None where the beacon has
    no such place (inside a collective: _seen_line says it, with the collective's own line)."""
    phase, loop = r.get("phase"), r.get("loop_frame")
    if phase not in ("data", "run") or not loop:
        return None
    dl = r.get("dataloader") or {}
    done = r.get("step") or 0
    if dl.get("eval"):
        what = f"its evaluation ({dl['eval']}) after step {done}, {'fetching a batch' if phase == 'data' else 'computing'}"
    elif phase == "data":
        what = f"data loading (fetching the batch of step {done + 1})"
    elif r.get("between") and done:
        what = (f"what runs after step {done}'s optimizer step, before step {done + 1}'s batch (the callbacks, the "
                f"scheduler, zero_grad, logging or a checkpoint between steps)")
    elif not any(isinstance(c.get("t"), (int, float)) and c["t"] > (r.get("step_end_t") or 0)
                 for c in r.get("coll_history") or []):
        # the optimizer hook's "between" byte was overwritten by the next batch (nothing else wrote since: no
        # collective after the step's end), so the rank had its batch: inside the step's own work
        what = f"step {done + 1}'s work after fetching its batch (forward, backward or the optimizer: not told apart " \
               f"without a stack)"
    else:
        what = (f"the work between step {done}'s optimizer step and step {done + 1}'s (its forward, backward, the "
                f"optimizer, or callbacks, logging, a checkpoint between steps: a collective since its last step "
                f"leaves which one unknown)")
    t, st, mean = end.get("t"), r.get("step_end_t"), r.get("step_mean_s")
    age = t - st if isinstance(t, (int, float)) and isinstance(st, (int, float)) and st else None
    if age is None:
        guess = "; a guess: when its last step ended is not recorded"
    elif age > PLACE_STEPS * (mean or 0.0) + PLACE_SLACK_S:
        guess = (f"; a guess: its last step ended {age:.1f} s before its end, longer than its steps take"
                 + (f" ({mean:.2f} s)" if mean else "") + ", so it may have left the loop since")
    else:
        guess = ""
    return (f", in {what}, in the loop at {_where(loop)} (its last recorded place, by its beacon: no stack at its end"
            f"{guess})")


def _seen_line(r: dict, frame: dict, end: dict) -> str:
    """RUN010's words for where a rank with no stack at its end (SIGKILL leaves none) was: the beacon's line is its
    last collective's call site, the recorder's last note of a line. Inside that collective (the beacon says so) it is
    where the rank died; completed, the rank had gone on and where it was is not recorded: the collective is said as
    context, never as the place of the end."""
    c = r.get("last_collective") or {}
    at_coll = c.get("line") == f"{frame.get('file')}:{frame.get('line')}"
    if at_coll and c.get("in"):
        return f", at {_where(frame)} (inside {c.get('op')} #{c.get('seq')}, by its beacon; no stack at its end)"
    if at_coll:
        nxt = {"data": " into data loading"}.get(r.get("phase") or "", "")
        return (f", where it was is not recorded (no stack at its end: {end.get('signal') or 'its end'} leaves none); "
                f"it had completed its last collective ({c.get('op')} #{c.get('seq')} at {_where(frame)}) and gone "
                f"on{nxt}")
    return f", its last recorded line {_where(frame)} (no stack at its end)"


_TOLD_TO_STOP = "the agent was told to stop"


def _stopped_from_outside(sec: dict, first: dict):
    """RUN010's words when no rank failed: the launcher's agent was told to stop (a signal to torchrun or accelerate
    launch: a scheduler's preemption or time limit, a user's kill) and ended every rank itself (run's launcher hook
    records the teardown with no failed worker). Naming a rank "died first" there blames a rank for the stop."""
    dead = [r for r in sec.get("ranks") or [] if r.get("end")]
    if not dead or any((r["end"].get("terminated_by") or {}).get("reason") != _TOLD_TO_STOP for r in dead):
        return None
    by = first["end"].get("terminated_by") or {}
    sig = first["end"].get("signal") or by.get("signal") or "a signal"
    step = f" at step {first.get('step')}" if first.get("step") else ""
    launcher = by.get("who") or "the launcher"
    return warning(
        f"the job was stopped from outside{step}: {launcher} was told to stop and ended {_ranks(dead)} with {sig}; "
        "no rank failed by itself",
        detail=(f"{launcher}'s agent recorded its teardown with no failed worker: it received a signal (SIGTERM or "
                "SIGINT from a scheduler's preemption or time limit, a user's kill, a container stop) and stopped the "
                "ranks. " + _order_text(sec, None, as_ends=True)).strip(),
        fix=("# find who sent the signal to the launcher:\n"
             "sacct -j $SLURM_JOB_ID --format=JobID,State,ExitCode,Elapsed,Timelimit   # SLURM: TIMEOUT / PREEMPTED / CANCELLED\n"
             "journalctl --since '-1h' | grep -iE 'kill|oom|stop'   # a user's or the system's kill\n"
             "# then resume from the last checkpoint (Trainer: resume_from_checkpoint=True)"),
        subjects=[f"rank:{r['rank']}" for r in dead if r.get("rank") is not None],
        evidence={"terminated_by": by, "order": (sec.get("death") or {}).get("order")})


def _model_mismatch(sec: dict):
    """RUN010 when the ranks died of DDP's construction check: each rank prints its own side of the comparison, so the
    rank that died first is not the culprit; the verdict is the shared fact's (facts.model_mismatch), over every rank's
    message."""
    dead = [r for r in sec.get("ranks") or [] if r.get("end")]
    texts = [str(((r["end"].get("exception") or {}).get("message")) or "") for r in dead]
    told = model_mismatch.judge(texts)
    if told is None:
        return None
    title, said, ranks, facts = told
    where = next((((r["end"].get("exception") or {}).get("user")) for r in dead
                  if (r["end"].get("exception") or {}).get("user")), None)
    detail = (f"{said} DDP compares the models when it wraps them (reducer.cpp, verify_params_across_processes) and "
              "every rank raises. " + _order_text(sec, None, as_ends=True))
    subj = [f"rank:{x}" for x in ranks] + ([f"line:{where['line']}"] if where and where.get("line") else [])
    return error(title + (f", at {_where(where)}" if where else ""), detail=detail.strip(),
                 fix="Build the same model on every rank before wrapping it: the same config and code path (no layer or "
                     "parameter added on some ranks only), the same checkpoint; compare "
                     "`sum(p.numel() for p in model.parameters())` on each rank before DDP(...)",
                 subjects=subj, evidence={"model_mismatch": facts, "order": (sec.get("death") or {}).get("order")})


@check("RUN011", "rank-oom-killed", family=FAMILY, when=("run",), needs=("run",), catalogue=("E2",))
def rank_oom_killed(snap):
    """The first rank to die was killed by the kernel's out-of-memory killer.

    What it checks
        A rank that disappeared without an exception (SIGKILL) while the cgroup's memory.events
        `oom_kill` counter rose during the job; it gives the rank's last resident memory.

    Why it matters
        The OOM killer leaves no Python traceback: the job looks like it crashed for no reason, or a
        peer's "Connection closed" error is blamed.

    Example
        Every rank loads the whole dataset into memory; 8 ranks exceed the container's limit.

    Fix
        Lower memory per rank (fewer DataLoader workers, memory-mapped datasets, smaller batches) or
        raise the memory limit of the job.
    """
    r = _first_death(snap)
    if r is None or r["end"].get("why") != "oom-killer":
        return
    kill = r["end"].get("kill") or {}
    what = kill.get("text") or f"killed by the out-of-memory killer (cgroup oom_kill +{r['end'].get('oom_kill')})"
    step = f" at step {r.get('step')}" if r.get("step") else ""
    yield error(f"rank {r['rank']} was {what.removeprefix('killed by ') if what.startswith('killed by ') else what}"
                .replace(f"rank {r['rank']} was the kernel", f"rank {r['rank']} was killed by the kernel")
                + f"{step}; last RSS {r['end'].get('rss_mb')} MiB",
                detail=("SIGKILL, no traceback. " + (f"Evidence: {kill['evidence']}. " if kill.get("evidence") else
                        "The rank disappeared without an exception while the cgroup's oom_kill counter rose. ")
                        + _order_text(_run(snap), r)),
                fix=kill.get("fix") or "Lower memory per rank (fewer DataLoader workers, a memory-mapped dataset) or "
                                       "raise the job's memory limit",
                subjects=[f"rank:{r['rank']}"], evidence={"end": r["end"], "pid": r.get("pid")})


@check("RUN013", "rank-aborted-at-exit", family=FAMILY, when=("run",), needs=("run",))
def rank_aborted_at_exit(snap):
    """A rank was killed by a signal while its interpreter shut down, after its own work had ended.

    What it checks
        Ranks whose end came after Python's exit handlers ran (the recorder's beacon says "exit")
        and by a signal (SIGABRT most often), when no rank failed before that. It says whether the
        default process group was still initialized at that moment.

    Why it matters
        Training finished, but the job fails: torchrun exits 1 and prints the rank as the "Root Cause"
        with SIGABRT, and the scheduler marks the run failed. With Gloo this is torch's teardown
        (ddpdoctor/data/teardown.json, from torch's and CPython's source): a Gloo worker thread frees
        a finished collective's tensors, which takes the GIL; after the interpreter began finalizing,
        CPython ends that thread with pthread_exit and its unwinding through torch's destructors
        aborts ("terminate called without an active exception", pytorch/pytorch#190489). It happens
        without ddpdoctor too (docs/measured/run.md, round 20: as often under plain torchrun).

    Example
        trainer.train() returns on every rank, then rank 1 dies on SIGABRT and torchrun reports
        "exitcode: -6 ... Root Cause (first observed failure)".

    Fix
        The training's outputs are complete: the abort came after them. For a clean exit, end main()
        by freeing every DDP-wrapped model (and the Trainer holding one), then `dist.barrier()` and
        `dist.destroy_process_group()` on every rank. The order matters: DDP's Reducer holds the
        process group, and when it is freed after destroy_process_group() it destroys the group with
        the GIL held, waiting for a Gloo thread that waits for the GIL: a hang at exit (measured here).
    """
    dead = _exit_aborts(_run(snap))
    if not dead:
        return
    live_pg = [r for r in dead if r["end"].get("pg_at_exit")]
    sigs = sorted({str(r["end"].get("signal")) for r in dead})
    who = _ranks(dead)
    steps = sorted({r.get("step") for r in dead if r.get("step")})
    after = f" after its last step ({steps[-1]})" if len(steps) == 1 else ""
    gloo = teardown.entry("gloo")
    cause = (f"the process group was still initialized: {gloo['abort_title']}" if live_pg else
             "the process group had been destroyed; a native library aborted during shutdown")
    yield error(f"{who} died on {'/'.join(sigs)} while the interpreter shut down{after}: the training itself ended, "
                f"but the job fails; {cause}",
                detail=gloo["abort_detail"] if live_pg else
                ("The rank's exit handlers had run (its work was over) when the signal came; torchrun names this rank "
                 "as the root cause and exits 1. Its default process group had been destroyed, but a DDP model still "
                 "alive holds the group in its Reducer, with the group's Gloo threads: torch's Gloo teardown can still "
                 "be the cause. Which library aborted is not known from here."),
                fix=gloo["fix"] if live_pg else
                    ("Free every DDP-wrapped model (and the Trainer holding one) before destroying the process group, "
                     "as the last lines of main(): `del trainer, model; gc.collect()`. If the abort stays, run the rank "
                     "under gdb or with core dumps enabled to see which library aborted at exit"),
                subjects=_subjects(dead),
                evidence={"ranks": [{"rank": r.get("rank"), "pid": r.get("pid"), "signal": r["end"].get("signal"),
                                     "pg_at_exit": r["end"].get("pg_at_exit"), "step": r.get("step")} for r in dead]})


@check("RUN016", "nccl-watchdog-timeout", family=FAMILY, when=("run",), needs=("run",), catalogue=("C3",))
def nccl_watchdog_timeout(snap):
    """torch's NCCL watchdog timed out a collective and is about to abort the job: its Flight Recorder
    dumps read, and every rank's stacks taken before the abort.

    What it checks
        `ddpdoctor run` turns on the Flight Recorder for the job (TORCH_FR_BUFFER_SIZE=2000,
        TORCH_NCCL_DUMP_ON_TIMEOUT=1, dumps into its run directory) unless you set those. When a
        dump appears the watchdog has timed out and will abort the process: it takes every rank's
        Python stacks (and native ones with py-spy) and reads the dumps: per process group, the first
        sequence number where the ranks part, the ranks that never issued it, the mismatched
        collectives, the ranks whose dump is missing.

    Why it matters
        After the abort every rank prints the same "Watchdog caught collective operation timeout",
        which names no culprit; the dump and the stacks say which rank is behind and where.

    Example
        Rank 5 never reaches all_reduce #41 (a data-dependent branch); the other ranks time out in it.

    Fix
        Look at the rank that never issued the collective (its stack says where it is), or at the
        mismatched collective's call sites.
    """
    wd = _run(snap).get("watchdog")
    if not wd:
        return
    an = wd.get("analysis") or []
    rs = [r for r in _run(snap).get("ranks") or [] if r.get("alive", True) and not r.get("end")]
    dumped = sorted(d["rank"] for d in wd.get("dumps") or [] if d.get("rank") is not None)
    if an:
        a = an[0]
        bits = []
        if a.get("never_issued"):
            bits.append(f"{_ranks([{'rank': x} for x in a['never_issued']])} never issued collective "
                        f"#{a.get('first_divergent_seq')} of process group {a.get('pg')}")
        for m in a.get("mismatches") or []:
            bits.append(f"collective #{m['seq']} differs: " + "; ".join(
                f"ranks {g['ranks']} {g['op']} {g['input_sizes']}" for g in m["groups"]))
            break
        waiting = a.get("waiting") or {}
        if waiting:
            w = next(iter(waiting.values()))
            bits.append(f"{_ranks([{'rank': int(x)} for x in waiting])} wait{'s' if len(waiting) == 1 else ''} in {w.get('op')}"
                        + (f" at {w['frame']}" if w.get("frame") else ""))
        if a.get("missing_dumps"):
            bits.append(f"no dump from {_ranks([{'rank': x} for x in a['missing_dumps']])}")
        head = "; ".join(bits) or f"process group {a.get('pg')} parts at #{a.get('first_divergent_seq')}"
    else:
        head = "the dumps agree: every rank issued the same collectives (the hang is below them: transport, GPU)"
    groups = _groups(rs) if rs else []
    where = "; ".join(f"{_ranks(g)}: {g[0].get('doing')} at {_where(g[0].get('user_frame'))}" for _, g in groups)
    yield error(f"NCCL's watchdog timed out (Flight Recorder dumps of {_ranks([{'rank': x} for x in dumped])}): {head}",
                detail=(f"Stacks taken {wd.get('stacks_after_s')} s after the first dump appeared, before the abort: "
                        f"{where or 'no live rank left'}. " + _native_hint(rs)),
                fix="Fix the rank that never issued the collective (its line above), or make the mismatched calls "
                    "agree; `ddpdoctor triage` reads the same dumps after the fact",
                subjects=_subjects(rs), evidence={"watchdog": wd, "ranks": _evidence(snap, rs)["ranks"]})


@check("RUN015", "job-stopped-stacks", family=FAMILY, when=("run",), needs=("run",))
def job_stopped(snap):
    """The job was stopped from outside: where every rank was, taken just before the kill.

    What it checks
        When `ddpdoctor run` itself gets SIGTERM or SIGINT (scancel, a SLURM time limit, Ctrl-C, a CI
        timeout), it takes every rank's Python stacks (faulthandler, from a signal handler: no GIL
        needed, even inside a C++ collective) and its last collectives before it ends the job, and
        groups the ranks by what they were doing and their innermost line of your code.

    Why it matters
        After the kill the evidence is gone: a job stopped by a time limit while it hung looks like
        a job that was merely slow.

    Example
        scancel 4242 while rank 3 waits for a batch and ranks 0-2 wait in the gradient all-reduce.

    Fix
        Read the groups: the rank whose line differs is the one to look at. If the job was slow
        rather than stuck, raise the time limit or checkpoint more often.
    """
    sec = _run(snap)
    kill = sec.get("kill")
    if not kill:
        return
    rs = [r for r in sec.get("ranks") or [] if r.get("alive", True) and not r.get("end")]
    if not rs:
        if kill.get("processes") and not sec.get("rendezvous") and not sec.get("ranks"):
            # processes had started (the launcher) but none was a rank yet: still starting, not stuck (RUN024
            # says what a launcher in the rendezvous waited for; RUN012 covers a stop before any process attached)
            yield warning(f"the job was stopped: {kill.get('reason')}, while it was still starting: "
                          f"{kill['processes']} of its processes had started, none had become a rank",
                          detail="No rank had reported yet (imports, launch, data set-up), so nothing of training was "
                                 "recorded and this says nothing about the job's health. A job stopped this early was "
                                 "stopped by hand, or by a limit shorter than its start-up.",
                          fix="# if the stop was not yours: compare the time limit with the job's start-up\n"
                              "ddpdoctor probe --nproc 2   # measures launch, imports and set-up",
                          evidence={"kill": kill})
        return
    groups = _groups(rs)
    parts = [f"{_ranks(g)}: {g[0].get('doing')} at {_where(g[0].get('user_frame'))}"
             + (f", step {g[0]['step']}" if g[0].get("step") else "") for _, g in groups]
    colls = "; ".join(f"rank {r['rank']}: {_coll_text(r)}" for r in rs if r.get("last_collective"))
    slurm = f" (SLURM job {kill['slurm_job']})" if kill.get("slurm_job") else ""
    yield warning(f"the job was stopped{slurm}: {kill.get('reason')}; " + "; ".join(parts),
                  detail=("Stacks taken before the kill, ranks grouped by what they were doing and their innermost "
                          "line of your code." + (f" Last collectives: {colls}." if colls else "")),
                  fix="Compare the groups: the rank whose line differs is the one to look at; `--report FILE` has "
                      "every stack",
                  subjects=_subjects(rs), evidence=dict(_evidence(snap, rs), kill=kill))


@check("RUN024", "stopped-in-rendezvous", family=FAMILY, when=("run",), needs=("run",))
def stopped_in_rendezvous(snap):
    """The job was stopped while its launcher still waited in the rendezvous: what it waited for.

    What it checks
        When `ddpdoctor run` gets SIGTERM or SIGINT and no rank has joined its process group yet: the
        nodes the launcher was told to expect and where they meet (its command line: `--nnodes`,
        `--rdzv-endpoint`, or `--master-addr`/`--master-port`), how many ranks started on this node and
        how many were inside init_process_group, and the launcher's own stack (torchrun's agent in
        `next_rendezvous`), taken before the stop. And when the job ended because its rendezvous never
        filled (an error, read from the job's output: the TCPStore's "Timed out after 600 seconds waiting
        for clients. 1/2 clients joined.", or a RendezvousTimeoutError): the nodes expected, the ones that
        joined (the store's count, this node's --node-rank, each node whose `ddpdoctor run` reached the
        doctor's store) and the ones missing.

    Why it matters
        A job stopped by a time limit (or `timeout`) while torchrun waited for a node that never came
        ended with "exit 143" and nothing else: no rank stalled and none died, because none had
        started. The missing node (a failed srun step, a wrong `--rdzv-endpoint`, a firewall) is the fault.

    Example
        `torchrun --nnodes 2 --rdzv-endpoint head:29400 train.py` on one node only, ended by `timeout 600`.

    Fix
        Start the other node(s) with the same `--rdzv-endpoint` and `--rdzv-id`, or launch with the nodes
        you have (`--nnodes 1`, or `--nnodes MIN:MAX`); check that every node reaches the endpoint
        (`ddpdoctor check` on each node).
    """
    sec = _run(snap)
    rz, kill = sec.get("rendezvous"), sec.get("kill")
    if rz and rz.get("ended") and not kill:
        yield from _rendezvous_unfilled(rz)
        return
    if not rz or not kill:
        return
    nn = rz.get("nnodes")
    ep = f"{rz['host']}:{rz['port']}" if rz.get("host") else None
    expect = (f"{nn} nodes" if nn else "its peers") + (f" at {ep}" if ep else "")
    started = rz.get("ranks_started") or 0
    here = (f"{started} rank(s) started on this node, {rz.get('ranks_in_init') or 0} of them inside "
            "init_process_group" if started else "no rank had started on this node (the launcher starts them after "
            "the rendezvous)")
    lf = rz.get("launcher_frame")
    at = f"; the launcher was in {lf['func']} ({_short(lf['file'])}:{lf['line']})" if lf else ""
    seen = rz.get("nodes_seen") or []
    if nn and seen:  # the nodes whose `ddpdoctor run` reached the doctor's store: joined, the rest missing
        at += (f"; {len(seen)} of {nn} nodes' ddpdoctor run reached its store: "
               f"{_nodes_text(seen, (rz.get('this_node') or {}).get('node_rank'))}")
    waited = f" for {rz['waited_s']:g} s" if rz.get("waited_s") else ""
    yield warning(f"the job was stopped ({kill.get('reason')}) while the launcher waited{waited} in the rendezvous "
                  f"for {expect}: {here}{at}",
                  detail=("No rank joined its process group, so no rank stalled and none died: the launcher was still "
                          f"waiting for {expect} to join. The node(s) it waited for never came, or could not reach "
                          + (ep or "the endpoint") + "."),
                  fix=("Start the other node(s) with the same --rdzv-endpoint and --rdzv-id (check each one's own "
                       "log: did its launcher start, and reach " + (ep or "the endpoint") + "?), or launch with the "
                       "nodes you have (--nnodes 1, or --nnodes MIN:MAX)"),
                  subjects=[f"endpoint:{ep}"] if ep else [],
                  evidence={"rendezvous": rz, "kill": kill})


def _nodes_text(nodes: list, nr) -> str:
    return ", ".join(f"{n.get('host')} (this node" + (f", --node-rank {nr})" if nr is not None else ")") if n.get("this")
                     else f"{n.get('host')} (its ddpdoctor run, pid {n.get('pid')})" for n in nodes)


def rendezvous_nodes(rz: dict) -> tuple:
    """(nodes expected, nodes joined, text of those that joined, text of those missing, how many missing) of a
    rendezvous that ended unfilled (the supervisor's rendezvous_ended): the launch's --nnodes, else the store's
    own expected count; joined from the store's count, else the nodes whose `ddpdoctor run` reached its store
    (the dynamic rendezvous gives no count). The node ranks are named where the command line gives this node's
    (--node-rank) and only it joined (static rendezvous: the store's host is node 0)."""
    end = rz.get("ended") or {}
    seen = rz.get("nodes_seen") or []
    expected = rz.get("nnodes") or end.get("expected")
    joined = end.get("joined")
    if joined is None and seen:
        joined = len(seen)
    me = rz.get("this_node") or {}
    nr = me.get("node_rank")
    if end.get("nodes_joined"):
        who = ", ".join(end["nodes_joined"])
    elif seen:
        who = _nodes_text(seen, nr)
    elif joined == 1:
        who = f"this node ({me.get('host')}" + (f", --node-rank {nr})" if nr is not None else ")")
    else:
        who = ""
    missing_n = expected - joined if expected and joined is not None else None
    if expected and joined == 1 and nr is not None and all(n.get("this") for n in seen):
        miss = ", ".join(f"node rank {i}" for i in range(expected) if i != nr)
    else:
        miss = ""
    return expected, joined, who, miss, missing_n


def _rendezvous_unfilled(rz: dict):
    end = rz.get("ended") or {}
    expected, joined, who, miss, missing_n = rendezvous_nodes(rz)
    ep = f"{rz['host']}:{rz['port']}" if rz.get("host") else None
    unit = "node" if rz.get("nnodes") else "process"
    after = f" after {end['timeout_s']:g} s" if end.get("timeout_s") else ""
    if joined is not None and expected:
        count = f"{joined} of {expected} {unit}s joined" + (f" ({who})" if who else "")
        gone = f"{missing_n} {unit}(s) missing" + (f": {miss}" if miss else "")
    else:
        count = f"{who} joined" if who else "the nodes that joined are not known (the rendezvous gives no count)"
        gone = f"{unit}(s) missing"
    where = f" at {ep}" if ep else ""
    launch = (f"the launch command expected {expected} {unit}s (--nnodes {rz['nnodes']}){where}" if rz.get("nnodes")
              else f"the process group expected {expected} processes{where}" if expected else "")
    yield error(f"the rendezvous timed out{after}: {count}; {gone}" + (f"; {launch}" if launch else ""),
                detail=(f"The launch's rendezvous never filled (read from the job's output: \"{end.get('line')}\"), so no "
                        "rank trained and none stalled or died: the other node(s) never started, were started with "
                        "another endpoint or --rdzv-id, or could not reach " + (ep or "the endpoint") + "."),
                fix=("Start the other node(s) with the same " + ("--master-addr and --master-port" if rz.get("endpoint_by") ==
                     "--master-addr" else "--rdzv-endpoint and --rdzv-id" if unit == "node" else "MASTER_ADDR/MASTER_PORT") + " before the rendezvous times out (check each one's own log: did its "
                     "launcher start, and reach " + (ep or "the endpoint") + "?), or use the nodes you have: "
                     "--nnodes 1 (or --nnodes MIN:MAX with --rdzv-backend c10d)"),
                subjects=[f"endpoint:{ep}"] if ep else [],
                evidence={"rendezvous": rz})


def _coll_text(r: dict) -> str:
    c = r.get("last_collective") or {}
    if not c:
        return "none"
    state = "waiting in it" if c.get("in") else "completed"
    shape = f" {c.get('shape')} {c.get('dtype') or ''}".rstrip() if c.get("shape") is not None else ""
    return f"{c.get('op')} #{c.get('seq')}{shape} ({state})"


@check("RUN021", "ranks-train-alone", family=FAMILY, when=("run",), needs=("run",), catalogue=("A1",))
def ranks_train_alone(snap):
    """The launcher started several ranks, but the training framework on each of them believes it is alone.

    What it checks
        At each rank's first optimizer step: the launch (WORLD_SIZE from torchrun, accelerate launch
        or srun), the process group (its world size, if one exists), what accelerate believes (its
        distributed type and number of processes) and whether a DistributedDataParallel forward ran.
        A launch of N > 1 ranks where accelerate says single process (DistributedType.NO, 1 process),
        or where no process group exists and no DDP forward ran, means every rank trains alone.

    Why it matters
        Nothing fails. Each rank trains on all the data with its own copy of the model, no gradient is
        synchronised, and N copies of the same work run at once: the job is no faster than one
        process, and the checkpoints of the ranks differ. On a host without a GPU, accelerate's
        `Accelerator()` is distributed only with `cpu=True` (accelerate/state.py, `_prepare_backend`):
        `torchrun` or `accelerate launch --multi_gpu` on a CPU host runs it in single-process mode,
        printing "Distributed environment: DistributedType.NO ... Num processes: 1".

    Example
        torchrun --nproc-per-node 2 run_clm_no_trainer.py ...    # on a CPU host: Accelerator() -> NO

    Fix
        Accelerator(cpu=True) on a CPU host (or ACCELERATE_USE_CPU=true, or `accelerate launch --cpu`
        with its multi-CPU set-up); on GPUs, check that each rank sees its GPU (CUDA_VISIBLE_DEVICES)
        and that LOCAL_RANK is set.
    """
    rs = [r for r in _run(snap).get("ranks") or [] if r.get("framework")]
    alone = []
    for r in rs:
        fw = r["framework"]
        try:
            launched = int(fw.get("env_world") or 1)
        except (TypeError, ValueError):
            launched = 1
        acc = fw.get("accelerate") or {}
        acc_alone = bool(acc) and (str(acc.get("distributed_type")).upper() in ("NO", "DISTRIBUTEDTYPE.NO")
                                   or (acc.get("num_processes") or 0) == 1)
        no_pg = fw.get("pg_world") is None and not fw.get("ddp")
        if launched > 1 and (acc_alone or no_pg or (fw.get("pg_world") or launched) < launched):
            alone.append((r, launched, acc, fw))
    if not alone:
        return
    r0, launched, acc, fw = alone[0]
    belief = (f"accelerate runs in single-process mode ({acc.get('distributed_type')}, "
              f"{acc.get('num_processes')} process)" if acc else "no process group and no DDP")
    pg = f"; a process group of {fw['pg_world']} exists beside it" if fw.get("pg_world") else ""
    cpu_host = acc and not acc.get("cpu")
    yield error(f"{_ranks([r for r, *_ in alone])} train{'s' if len(alone) == 1 else ''} alone: the launch started "
                f"{launched} ranks (WORLD_SIZE={launched}) but {belief} on "
                f"{'each of them' if len(alone) > 1 else 'it'}{pg}: every rank trains on all the data, with no "
                "gradient sync",
                detail="; ".join(f"rank {r.get('rank')}: WORLD_SIZE={f.get('env_world')}, process group "
                                 f"{f.get('pg_world') or 'none'}, accelerate {(a or {}).get('distributed_type') or '-'} "
                                 f"with {(a or {}).get('num_processes') or '-'} process(es), DDP forward "
                                 f"{'yes' if f.get('ddp') else 'no'}" for r, _, a, f in alone) + ".",
                fix=("accelerator = Accelerator(cpu=True)  # on a host without GPUs accelerate is distributed only "
                     "with cpu=True (or export ACCELERATE_USE_CPU=true)") if cpu_host else
                    "Check that each rank sees its device and that LOCAL_RANK is set (ddpdoctor check)",
                subjects=[f"rank:{r.get('rank')}" for r, *_ in alone] + (["pkg:accelerate"] if acc else []),
                evidence={"ranks": {str(r.get("rank")): f for r, _, _, f in alone}})


@check("RUN025", "launch-starts-one-process", family=FAMILY, when=("run",), needs=("run",), catalogue=("A1",))
def launch_starts_one_process(snap):
    """`accelerate launch` was asked for several processes but will start one.

    What it checks
        The launch command `ddpdoctor run` ran, when it is `accelerate launch`: the processes its
        options (or config file) ask for, and the launcher accelerate takes for them, decided as its
        launch.py decides (data/launchers.json, accelerate's "launch_modes", with the source): with
        `--multi_gpu` (or `--use_deepspeed`, `--use_fsdp`...), a config file whose distributed_type is
        MULTI_GPU (or another multi-device type), or more than one visible GPU, one process per device;
        otherwise, or under `--cpu`, simple_launcher: ONE process (several only through mpirun, with an
        mpirun hostfile).

    Why it matters
        `accelerate launch --num_processes 2 train.py` on a CPU host starts one process and says
        nothing: the job trains on one process at half the asked parallelism (or less), and its
        throughput is taken for the multi-process one.

    Example
        accelerate launch --num_processes 2 run_clm_no_trainer.py ...   # CPU host, no config file

    Fix
        accelerate launch --multi_gpu --num_processes 2 ...   (torchrun's launcher; on a CPU host also
        Accelerator(cpu=True), see RUN021), or in the config file `distributed_type: MULTI_GPU`
        (`MULTI_CPU` starts several processes only through mpirun: `mpirun_config.mpirun_hostfile`).
    """
    from ddpdoctor.facts import launch

    sec = _run(snap)
    facts = sec.get("accelerate_launch")
    if not isinstance(facts, dict):
        return
    cmd = launch.parse_command(sec.get("command") or [])
    mode = launch.accelerate_launch_mode(cmd, facts.get("config"), bool(facts.get("default_config")), facts.get("devices"))
    if not mode or mode["mode"] != "simple" or not (mode.get("asked") or 0) > 1:
        return
    n = mode["asked"]
    started = len([r for r in sec.get("ranks") or [] if r.get("pid") is not None])
    cfg = facts.get("config_file")
    seen = f"; ddpdoctor saw {started} rank process{'es' if started != 1 else ''}" if started else ""
    yield warning(
        f"accelerate launch was asked for {n} processes but starts ONE ({mode['why']}: accelerate's simple "
        f"launcher){seen}",
        detail=(f"accelerate's launch.py starts one process per device only with --multi_gpu (or --use_deepspeed, "
                "--use_fsdp, --use_megatron_lm, --tpu; none under --cpu), a config file whose distributed_type is a "
                "multi-device one, or, with no config file, more than one visible GPU. Otherwise simple_launcher runs "
                f"the script once, whatever --num_processes says. Config file read: {cfg or 'none'}; GPUs seen: "
                f"{facts.get('devices') if facts.get('devices') is not None else 'not known'}"
                + (" (AMD: the KFD topology's GPU nodes, within ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / "
                   "CUDA_VISIBLE_DEVICES)" if facts.get("gpu_vendor") == "amd" else "") + "."),
        fix=(f"accelerate launch --multi_gpu --num_processes {n} ...   # or distributed_type: MULTI_GPU in the config "
             "file (MULTI_CPU starts several processes only through mpirun: mpirun_config.mpirun_hostfile); on a CPU "
             "host also Accelerator(cpu=True) (RUN021)"),
        subjects=["pkg:accelerate"], evidence={"mode": mode, "facts": facts, "command": sec.get("command")})


@check("RUN012", "run-not-attached", family=FAMILY, when=("run",), needs=("run",))
def not_attached(snap):
    """ddpdoctor could not attach to the job: no process of it loaded the recorder.

    What it checks
        That at least one Python process of the job imported ddpdoctor's recorder (through the
        sitecustomize that `ddpdoctor run` puts on PYTHONPATH).

    Why it matters
        The job then ran without the doctor: no stall localizer, no death root cause. It is not
        broken by this.

    Example
        The job runs in a container or another virtual environment without ddpdoctor, or with
        `python -I`/`-S`, which ignore PYTHONPATH or site.

    Fix
        Install ddpdoctor in the job's interpreter (pip install ddpdoctor), or call
        ddpdoctor.preflight()/DoctorCallback from the script.
    """
    sec = _run(snap)
    if sec.get("attached", True):
        return
    if stopped_from_outside(sec.get("events")):
        # not a missing install: the stop came while the job's processes were still starting (importing)
        yield warning("the job was stopped from outside before any of its processes had loaded ddpdoctor: "
                      "nothing of it was recorded, and nothing can be judged",
                      detail="ddpdoctor run received a stop signal (SIGTERM or SIGINT: scancel, a time limit, `timeout`, "
                             "Ctrl-C) while the job's processes were still starting, before the first of them imported "
                             "the recorder. This says nothing about the job's health. A job stopped this early was "
                             "stopped by hand, or by a limit shorter than its start-up (imports alone can take tens of "
                             "seconds on a busy host).",
                      fix="# if the stop was not yours: compare the scheduler's time limit with the job's start-up\n"
                          "ddpdoctor probe --nproc 2   # measures launch, imports and set-up",
                      evidence={"command": sec.get("argv0"), "exit_status": sec.get("exit_status")})
        return
    yield info("no process of the job loaded ddpdoctor (another interpreter or virtual environment?); "
               "it ran unchanged, without the doctor",
               fix="pip install ddpdoctor  # in the job's own environment", evidence={"command": sec.get("argv0")})


def stopped_from_outside(events) -> bool:
    """Whether `ddpdoctor run` itself received a stop signal (its `kill` event: SIGTERM or SIGINT from outside), from
    the supervisor's events (the run section's "events"): the one test, for these checks and the command's summary."""
    return any(e.get("kind") == "kill" for e in events or [])


INTERRUPTED = (130, 143)  # 128 + SIGINT, 128 + SIGTERM: the user (or the scheduler) ended the job
NOT_AN_END = ("straggler", "setup")  # events whose findings say why a job is slow, not why it ended


@check("RUN022", "job-failed-unexplained", family=FAMILY, when=("run",), needs=("run",))
def failed_unexplained(snap):
    """The job failed, and ddpdoctor recorded no death or stall that explains it.

    What it checks
        The job's exit status at its end (the `run` section's `exit_status`): not 0, not an interrupt
        (SIGINT or SIGTERM from outside), not ended by `--on-stall stop`, while no stall or death was
        recorded and judged (the section's `events` hold no stall, death, watchdog or stop with findings;
        a straggler or a set-up finding explains no failure).

    Why it matters
        "No stall, no death" after a failed job reads as health. A failure that no rule explains is said
        to be unexplained, with what is known: the status, whether the doctor was attached, and which
        ranks it saw. It is typically a process that never became a rank: the script failed before
        `init_process_group`, the launcher itself failed, or the job is not distributed at all.

    Example
        `ddpdoctor run -- torchrun --nproc-per-node 2 train.py` where train.py raises while parsing its
        arguments: the job exits 1 before any rank joins the process group.

    Fix
        Read the job's own output just above (its last lines hold the error), or keep it and let
        ddpdoctor read it: `COMMAND 2>&1 | tee job.log; ddpdoctor triage job.log`.
    """
    sec = _run(snap)
    status = sec.get("exit_status")
    if not isinstance(status, int) or status == 0 or status in INTERRUPTED or sec.get("stopped") \
            or stopped_from_outside(sec.get("events")):
        return   # a stop from outside explains the end (torchrun exits 1 after its SignalException, not 143)
    if any(e.get("findings") and e.get("kind") not in NOT_AN_END for e in sec.get("events") or []):
        return  # a stall, death, watchdog or stop finding already explains it
    ranks = [r for r in sec.get("ranks") or [] if r.get("rank") is not None]
    if not sec.get("attached", True):
        why = ("No process of the job loaded ddpdoctor (RUN012), so nothing of its ranks was recorded: the job's "
               "own output above is the only evidence.")
    elif not ranks:
        procs = sec.get("processes") or 0
        why = (f"{procs} process(es) of the job loaded ddpdoctor, but none joined a process group: the failure came "
               "before init_process_group (imports, argument parsing, data set-up), or the job is not distributed. "
               "Its own output above holds the error.")
    else:
        why = (f"ddpdoctor saw {_ranks(ranks)} and none of them died or stalled as far as it could tell: the "
               "process that failed is another one (the launcher, or a process that is not a rank), or a rank "
               "failed in a way it could not record.")
    yield error(f"the job failed (exit status {status}) and no rule explains it",
                detail=why,
                fix="# keep the job's output and let ddpdoctor read it:\n"
                    f"{redact_text(shlex.join(sec.get('command') or ['COMMAND']))} 2>&1 | tee job.log\n"
                    "ddpdoctor triage job.log",
                subjects=[f"rank:{r['rank']}" for r in ranks],
                evidence={"exit_status": status, "attached": sec.get("attached", True),
                          "processes": sec.get("processes"), "ranks_seen": [r["rank"] for r in ranks]})


def _steady_text(sp: dict) -> str:
    """The straggler's margin by its steady part (facts.steps.steady_part), in words."""
    return (f" (under 3 sigma of it: every rank's step swings together; judged instead by its {sp['part']} part, "
            f"{sp['extra_ms']:.0f} ms longer per step, sigma {sp['extra_sigma_ms']:.1f} ms, and the others' wait for it, "
            f"{sp['lead_ms']:.0f} ms per step, sigma {sp['lead_sigma_ms']:.1f} ms: both steady)")


@check("RUN020", "straggler", family=FAMILY, when=("run",), needs=("run",), catalogue=("F13",))
def straggler(snap):
    """One rank (or a few) is slower than the others, and every rank waits for it at each step.

    What it checks
        Each rank's step split, measured inside the job (data wait, compute outside collectives,
        time blocked in collectives, optimizer, other), over the last steps every rank ran (at least
        20 and 3 s of them; the slow rank must lead in each third of them, by more than 3 sigma of
        the other ranks' own step-time spread, so a host burst names nobody; a short job of 8-19
        steps spanning 3 s is judged only for a rank that leads EVERY step, by at least half the
        step: a healthy job's ranks take the lead by turns, one leads all n steps in 2^(1-n) of them). Under
        DDP the all-reduce makes every rank's step take the same time, so a slow rank looks like the
        others; but it is the one that waits least in collectives while the others wait for it. It
        names that rank, what it costs the job (the others' extra wait per step), its part of the
        split that is long, and the cause its facts show: a slow DataLoader (workers, /dev/shm), CPU
        oversubscription (threads against its cores and affinity), a throttled GPU (NVML), a busy
        host (steal, load), extra work on that rank (rank-0 logging or saving), or a rank that waits
        outside any collective (a sleep, I/O, a lock), with the line where samples of its stack
        found it. A rank whose lead is its threads' wait for a CPU (the host holds it back: run-queue
        delay) is RUN023, not a straggler of the job. At the job's end a rank named live whose lead
        began with the job's first steps and ended, followed by at least the test's window of steps
        (20, 3 s) in which it no longer leads by the cost bar, is told as the job's start-up (an
        info: a warm-up, a cold cache), not a straggler.

    Why it matters
        The whole job runs at the speed of its slowest rank: a rank that is 200 ms late per step
        makes every other rank idle 200 ms per step. Per-rank timers cannot see it, since every
        rank's step takes the same time.

    Example
        Rank 0 writes a log line and saves a metrics file at every step; or rank 3's host runs
        another job; or rank 1 loads its batches with num_workers=0 from slow storage.

    Fix
        Remove the cause on that rank (move rank-0 work out of the step or to a thread; more
        DataLoader workers; OMP_NUM_THREADS = cores / ranks; another host), then compare the table
        again (`kill -USR1` the `ddpdoctor run` process prints it at any time).
    """
    s = _run(snap).get("straggler")
    if not s or (s.get("host_held") or {}).get("held"):
        return  # held by the host: RUN023
    c = s.get("cause") or {}
    ranks = [{"rank": r} for r in s["ranks"]]
    who = _ranks(ranks)
    su = s.get("startup")
    if su:  # named live, then judged at the job's end: its lead was the job's start-up (facts.steps.startup)
        a, b = su["slow_steps"]
        yield info(f"{who} was slow only at the job's start (steps {a}-{b}: the other ranks waited {su['slow_cost_ms']:.0f} "
                   f"ms per step for it), then kept pace for {su['steady_n']} sampled steps: a start-up, not a straggler "
                   "of the job",
                   detail=(f"Named live as the straggler (steps {s['window'][0]}-{s['window'][-1]}, {100 * (s.get('cost_frac') or 0):.0f}% of "
                           f"the {s['step_ms']:.0f} ms step; the window's rule cannot tell a start-up from a straggler "
                           f"while it lasts). Its lead began with the job's first recorded steps and ended at step {b}; over "
                           f"the {su['steady_n']} sampled steps common to every rank that followed (steps "
                           f"{su['steady_steps'][0]}-{su['steady_steps'][1]}, {su['steady_s']:g} s of {su['steady_step_ms']:.1f} ms "
                           f"steps: at least what the straggler test needs to name a rank) its median lead was "
                           f"{su['steady_lead_ms']:.1f} ms, under the cost bar of {su['bar_ms']:.1f} ms. What it cost: about "
                           f"{su['slow_cost_ms'] * (b - a + 1) / 1000:.1f} s of the other ranks' time. Usual causes: cudnn "
                           "benchmark and the caching allocator's first steps, torch.compile, a cold page cache, rank 0's "
                           "extra first-step work (tokenising inside main_process_first, the first evaluation or save)."),
                   fix=(f"Nothing to fix if a slow start is expected; if it costs too much, move the work out of the first "
                        f"steps on {who} (tokenise and cache the data set before the job: datasets.map(...).save_to_disk, "
                        "or load_from_cache_file; warm up compilation with a few steps of the same shapes)"),
                   subjects=[f"rank:{r}" for r in s["ranks"]] + ["phase:start-up"],
                   evidence={"startup": su, "straggler": {k: s.get(k) for k in ("ranks", "cost_ms", "cost_frac", "step_ms",
                                                                               "window", "detected_at_step")}})
        return
    steps = s.get("window") or [None, None]
    cost = s["cost_ms"]
    part = s["part"]
    line = next((f.get("line") for f in (s.get("facts") or {}).values() if f.get("line")), None)
    title = (f"{who} {'is the straggler' if len(ranks) == 1 else 'are the stragglers'}: the other ranks wait "
             f"{cost:.0f} ms per step for {'it' if len(ranks) == 1 else 'them'} ({100 * (s.get('cost_frac') or 0):.0f}% "
             f"of the {s['step_ms']:.0f} ms step); {stepsplit.long_part_text(s)}" + (f": {c['text']}" if c.get("text") else ""))
    waits = ", ".join(f"rank {r} {v:.1f} ms" for r, v in (s.get("collective_ms") or {}).items())
    parts = "; ".join(f"{p} {v['straggler_ms']:.1f} vs {v['others_ms']:.1f} ms" for p, v in (s.get("parts") or {}).items())
    which = ("every sampled step of a job that ended within 20 common steps, spanning at least 3 s: the short rule, "
             f"every step led by the same rank(s) by at least {stepsplit.SHORT_COST_FRAC:.0%} of the step"
             if s.get("rule") == "short" else "the last ones every rank ran, at least 20 and 3 s of them")
    if s.get("spanned_steps") and s.get("judged_steps") and s["spanned_steps"] > s["judged_steps"]:
        which += (f"; {s['judged_steps']} of these {s['spanned_steps']} steps were sampled (the split is measured "
                  f"every k-th step of steps under 50 ms) and judged" + (f", {s['wall_s']:g} s of the job"
                                                                     if s.get("wall_s") is not None else ""))
    detail = (f"Steps {steps[0]}-{steps[-1]} ({which}): median time blocked in collectives per step: {waits}. {who} waits least in "
              f"{100 * s.get('consistent', 0):.0f}% of these steps"
              + (f" that show a lead ({s['neutral_steps']} where no rank waited for another by the cost bar count neither way)"
                 if s.get("neutral_steps") else "")
              + ", and by at least the cost bar in each third of them; "
              f"the cost against the other ranks' own spread: sigma {s.get('others_sigma_ms') or 0:.1f} ms"
              + (_steady_text(s["steady_part"]) if s.get("steady_part") else "")
              + f". Its parts against the others' median: {parts}; "
              f"CPU {s['cpu_ms']['straggler']:.1f} vs {s['cpu_ms']['others']:.1f} ms per step.")
    kind = c.get("kind")
    fix = {
        "slow-data-loader": "DataLoader(num_workers=4, pin_memory=True, persistent_workers=True)  # on every rank; "
                            "or preprocess and cache the data (and give /dev/shm room: docker --shm-size=8g)",
        "cpu-oversubscribed": "export OMP_NUM_THREADS=$(( $(nproc) / LOCAL_WORLD_SIZE ))  # and pin each rank to its "
                              "own cores (torchrun --numa-binding, taskset)",
        "gpu-throttled": "nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER  # on that node: fix cooling or power, or "
                         "move the job off the GPU",
        "busy-host": "Move the job off the busy host, or stop what else runs there (top; steal time means the "
                     "hypervisor: ask for a dedicated instance)",
        "extra-work": f"Move the extra work on {who} out of the training step (log every N steps; save in a background "
                      "thread; evaluate on every rank or not at all)"
                      + ("; the HF Trainer: TrainingArguments(logging_steps=50), not 1, and disable_tqdm=True where no one "
                         "watches the bar" if (c.get("evidence") or {}).get("between_steps") else "")
                      + (f": look at {line}" if line else ""),
        "waiting": f"Find what {who} waits for" + (f" at {line}" if line else "") + " (a sleep, slow storage, a lock) "
                   "and remove it from the step",
    }.get(kind, f"Profile {who} (py-spy dump --pid PID, or `kill -USR1` the ddpdoctor run process for the table)")
    subjects = [f"rank:{r}" for r in s["ranks"]] + [f"part:{part}"]
    yield warning(title, detail=detail, fix=fix, subjects=subjects,
                  evidence={"straggler": {k: s.get(k) for k in ("ranks", "others", "cost_ms", "cost_frac", "step_ms",
                                                                "part", "parts", "collective_ms", "consistent", "neutral_steps",
                                                                "window", "cpu_ms", "detected_at_step",
                                                                "others_sigma_ms", "steady_part", "sustained_parts")},
                            "cause": c, "facts": s.get("facts"), "host_held": s.get("host_held")})


@check("RUN023", "held-by-the-host", family=FAMILY, when=("run",), needs=("run",), catalogue=("F13",))
def held_by_the_host(snap):
    """A rank is slow because its host holds it back, not because of the job.

    What it checks
        A rank that RUN020's test finds slow (the others wait for it in collectives, at every third
        of at least 20 steps and 3 s), whose extra wall time is time its threads spent runnable but
        not running: the scheduler's run-queue delay, read from /proc/PID/task/TID/schedstat (second
        field; kernel Documentation/scheduler/sched-stats.rst) of every local rank at each straggler
        check, over the same steps: the delay on the step's path, the main thread's plus the
        most-delayed compute thread's (one that ran about as long as the rank's busiest thread: an
        OpenMP or intra-op worker; not Gloo's I/O threads, which mostly sleep), never more than the
        wall time (the threads' delays summed count waits that overlap in time more than once). The
        straggler's delay beyond the other ranks' median, per step, is the host's share of the cost. When what is left passes neither the straggler's cost bar
        nor its margin over the others' spread, the job has no straggler of its own: the host holds
        the rank back (another process on its CPUs, a busy host). A rank whose own threads crowd its
        CPUs (more runnable threads per CPU than the other ranks') stays a straggler (RUN020): its
        run-queue wait is the job's. In a VM, steal time counts too: the share of the rank's CPUs'
        time the hypervisor gave to someone else (/proc/stat, each cpuN line's 8th value; kernel
        Documentation/filesystems/proc.rst), beyond the other ranks' CPUs' share, times the step (a
        guest thread whose vCPU is taken away shows no run-queue delay inside the guest).

    Why it matters
        The job runs at the speed of the held rank all the same, but nothing in the job will fix it:
        the fix is on the host (what else runs on those CPUs, the ranks' pinning). A straggler alarm
        would send the user looking in their code.

    Example
        Rank 1 is pinned to CPU 1 and a backup, another job or a runaway process spins on CPU 1:
        rank 1's forward and backward take twice the wall time at the same CPU time.

    Fix
        Find what else runs on the rank's CPUs (top -H; ps -eLo pid,psr,pcpu,comm | sort -k3 -n) and
        move it away, or pin the ranks to CPUs nothing else uses (taskset, torchrun --numa-binding);
        with steal time, move the job to dedicated (not burstable or oversold) instances.
    """
    s = _run(snap).get("straggler")
    h = (s or {}).get("host_held") or {}
    if not s or not h.get("held"):
        return
    ranks = [{"rank": r} for r in s["ranks"]]
    who = _ranks(ranks)
    host = next((f.get("host") for f in (s.get("facts") or {}).values() if f.get("host")), None)
    steps = s.get("window") or [None, None]
    its = "its" if len(ranks) == 1 else "their"
    shares = []
    if h.get("runq_ms", 0) >= 0.5 or not h.get("steal_ms"):
        shares.append(f"{h['runq_ms']:.0f} ms of it is {its} threads waiting for a CPU")
    if h.get("steal_ms"):
        shares.append(f"{h['steal_ms']:.0f} ms of it is {its} CPUs' time taken by the hypervisor (steal)")
    title = (f"{who} {'is' if len(ranks) == 1 else 'are'} held back by {'its host' if not host else 'host ' + host}, "
             f"not by the job: the other ranks wait {s['cost_ms']:.0f} ms per step for "
             f"{'it' if len(ranks) == 1 else 'them'}, and " + " and ".join(shares))
    detail = (f"Steps {steps[0]}-{steps[-1]}: {stepsplit.held_text(s)}. Its CPU time per step "
              f"{s['cpu_ms']['straggler']:.1f} ms against the others' {s['cpu_ms']['others']:.1f} ms. "
              + ("The run-queue delay is the time a thread is runnable but not running (/proc/PID/task/TID/schedstat): "
                 "another process, or more threads than CPUs on this host, took the CPU." if h.get("runq_ms") else "")
              + (" Steal time is time the hypervisor ran something else while this VM's vCPU wanted to run "
                 "(/proc/stat): another tenant of the physical host, or a VM's CPU credits spent." if h.get("steal_ms") else ""))
    yield warning(title, detail=detail,
                  fix="top -H -p $(pgrep -d, -f YOUR_SCRIPT)   # and: ps -eLo pid,psr,pcpu,comm --sort=-pcpu | head\n"
                      "# move what else runs on its CPUs away, or pin the ranks to CPUs nothing else uses "
                      "(taskset -c, torchrun --numa-binding)",
                  subjects=[f"rank:{r}" for r in s["ranks"]] + ["host"],
                  evidence={"straggler": {k: s.get(k) for k in ("ranks", "others", "cost_ms", "cost_frac", "step_ms",
                                                                "part", "parts", "collective_ms", "window", "cpu_ms",
                                                                "detected_at_step", "others_sigma_ms")},
                            "host_held": h, "cause": s.get("cause"), "facts": s.get("facts")})


# RUN029 (round 24, issue 27: "why is my real job slow" when no rank is slower than the others): the job is input-bound
# when EVERY rank spends at least INPUT_BOUND_SHARE of its median step waiting for its next batch over at least
# INPUT_MIN_STEPS measured steps (facts.steps.summary: start-up steps left out; 10, not 20: a 20-step job keeps 15
# after its 5 start-up steps, and runcol24's run-r24 j5, every rank's loader +1 s per batch, went unsaid at 20). Every
# rank's MEDIAN over 10 steps is the figure, not one step's. Half the step is the bar: then the
# input pipeline, not the model, the collectives or the GPU, sets the pace, and a faster GPU or more ranks would not
# make the job faster. One rank alone above it is RUN020's data straggler, not this.
INPUT_BOUND_SHARE = pace.knowledge()["data"]["bar"]  # 0.5 (data/step_pace.json, with RUN030's and RUN031's bars)
INPUT_MIN_STEPS = pace.knowledge()["data"]["min_steps"]  # 10
_DL_DOC = ("torch/utils/data/dataloader.py (torch 2.13.0, pytorch/pytorch @cf30153c) DataLoader: num_workers \"``0`` "
           "means that the data will be loaded in the main process. (default: ``0``)\"; persistent_workers keeps the "
           "workers between epochs; prefetch_factor batches are loaded in advance by each worker")


@check("RUN029", "input-bound", family=FAMILY, when=("run",), needs=("run",), catalogue=("F13",))
def input_bound(snap):
    """Every rank waits for its next batch for most of the step: the input pipeline sets the job's pace.

    What it checks
        At the end of a job, each rank's step split (facts.steps.summary over its measured steps,
        start-up left out): the data part's median against the step's median. Every rank at or above
        half the step, over at least 10 measured steps, with no stall or death. The loader's facts
        (num_workers, pin_memory, persistent_workers, prefetch_factor, its line) come with it.

    Why it matters
        The usual question "why is DDP no faster than one GPU" often has this answer: batches are
        made in the training process (num_workers=0, torch's default) or by too few workers, so
        the GPUs idle between steps. More GPUs, mixed precision or a larger model change nothing
        while the loader sets the pace; a straggler test finds nothing, since every rank waits alike.

    Example
        DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))   # num_workers=0: decoding in the step

    Fix
        DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds), num_workers=4, pin_memory=True,
                   persistent_workers=True, prefetch_factor=2)   # keep workers x ranks per node <= its cores
    """
    sec = _run(snap)
    if sec.get("stall") or sec.get("death") or not sec.get("ranks"):
        return
    paced = pace.shares(sec["ranks"], "data", INPUT_BOUND_SHARE, INPUT_MIN_STEPS)
    if paced is None:
        return
    shares, rows, lo = paced["shares"], paced["rows"], paced["low"]
    med, step = pace.medians(shares)
    dl = next((r.get("dataloader") for r in rows if isinstance(r.get("dataloader"), dict) and r.get("dataloader")),
              None) or {}
    workers = dl.get("workers")
    facts = []
    if workers is not None:
        facts.append(f"num_workers={workers}" + (" (batches are made in the training process itself, between steps)"
                                                 if workers == 0 else ""))
    for key, name in (("pin", "pin_memory"), ("persistent", "persistent_workers"), ("prefetch", "prefetch_factor")):
        if dl.get(key) is not None:
            facts.append(f"{name}={dl[key]}")
    at = dl.get("at")
    where = f" at {str(at).rsplit('/', 1)[-1]}" if at else ""
    ranks = [{"rank": k} for k, _ in pace.ordered(shares)]
    steps = paced["steps"]
    title = (f"the input pipeline sets the pace: every rank waits for its next batch {lo:.0%} or more of the step "
             f"(data {med:.0f} of {step:.0f} ms median, {_ranks(ranks)})")
    detail = (f"Over {steps} measured steps per rank (start-up left out), the data part is "
              + _per_rank(pace.ordered(shares))
              + ". Compute, collectives and the optimizer share the rest: a faster GPU or more ranks would not make "
              "this job faster. " + (f"The training DataLoader{where}: " + ", ".join(facts) + ". " if facts else "")
              + f"(The loader's options: {_DL_DOC}.)")
    if workers == 0:
        fix = ("DataLoader(..., num_workers=4, pin_memory=True, persistent_workers=True, prefetch_factor=2)  "
               "# workers make batches beside the step; keep num_workers x ranks per node <= the node's cores")
    else:
        fix = (f"Raise num_workers (now {workers}) toward the cores per rank, make each item cheaper (tokenise / decode "
               "once ahead of training, a memory-mapped dataset), and check the storage it reads and /dev/shm")
    subjects = [f"rank:{k}" for k, _ in pace.ordered(shares) if k is not None]
    if at and str(at).rsplit(":", 1)[-1].isdigit():
        subjects.append(f"line:{str(at).rsplit(':', 1)[-1]}")
    yield warning(title, detail=detail, fix=fix, subjects=subjects,
                  evidence={"data_share": {str(k): round(m / s, 4) for k, (m, s) in shares.items()},
                            "steps": steps, "dataloader": dl, "bar": INPUT_BOUND_SHARE})


PER_RANK_SHOWN = 8  # a pace finding's detail names each rank's figures up to this many ranks, then the extremes


def _per_rank(rs: list) -> str:
    """`rank r: part of step ms (share)` for each (rank, (part_ms, step_ms)) pair; past PER_RANK_SHOWN ranks, the
    lowest and the highest share and how many ranks lie between (the evidence keeps every rank's share): robust25,
    10^5 ranks made an 8 MB detail sentence."""
    def one(r, m, s):
        return f"rank {r}: {m:.1f} of {s:.1f} ms ({m / s:.0%})"
    if len(rs) <= PER_RANK_SHOWN:
        return "; ".join(one(r, m, s) for r, (m, s) in rs)
    by_share = sorted(rs, key=lambda kv: kv[1][0] / kv[1][1])
    lo, hi = by_share[0], by_share[-1]
    return (f"lowest {one(lo[0], *lo[1])}; highest {one(hi[0], *hi[1])}; {len(rs) - 2:,} more ranks in between")


def _paced_by(sec: dict, part: str) -> Optional[dict]:
    """The shares of `part` when it sets the pace of a job with no stall, no death and no straggler (a straggler's
    wait is RUN020's; one named only for the job's start-up is not one): facts.pace over data/step_pace.json."""
    if sec.get("stall") or sec.get("death") or not sec.get("ranks"):
        return None
    s = sec.get("straggler")
    if s and not (isinstance(s, dict) and s.get("startup")):
        return None
    k = pace.knowledge()[part]
    return pace.shares(sec["ranks"], part, k["bar"], k["min_steps"])


def _pace_finding(paced: dict, part: str, title_head: str, extra: str = "", fix_first: Optional[str] = None):
    k = pace.knowledge()[part]
    sh = paced["shares"]
    med, step = pace.medians(sh)
    rs = pace.ordered(sh)
    title = (f"{title_head}: every rank spends {paced['low']:.0%} or more of its step {k['what']} ({part} {med:.0f} of "
             f"{step:.0f} ms median, {_ranks([{'rank': r} for r, _ in rs])}), and no rank is slower than the others")
    detail = (f"Over {paced['steps']} measured steps per rank (start-up left out), the {part} part is "
              + _per_rank(rs) + ". "
              + k["why"] + (" " + extra if extra else "") + " (Sources: " + "; ".join(k["sources"]) + ".)")
    fixes = ([fix_first] if fix_first else []) + k["fixes"]
    return warning(title, detail=detail, fix="\n".join(f"# {x}" for x in fixes),
                   subjects=[f"rank:{r}" for r, _ in rs if r is not None],
                   evidence={f"{part}_share": {str(r): round(m / s, 4) for r, (m, s) in rs},
                             "steps": paced["steps"], "bar": k["bar"]})


@check("RUN030", "collective-bound", family=FAMILY, when=("run",), needs=("run",), catalogue=("F5", "F6", "F13"))
def collective_bound(snap):
    """Every rank spends most of its step blocked in collectives, and no rank is slower: communication sets the pace.

    What it checks
        At the end of a job, each rank's step split over its measured steps (start-up left out): the
        collective part's median against the step's median. Every rank at or above half the step, over
        at least 10 measured steps, with no stall, no death and no straggler (a straggler's wait is
        RUN020's). The process group's backend comes with it.

    Why it matters
        This is the answer to "why is DDP slower than one GPU / than DataParallel": each step's
        all-reduce sends the model's gradients whatever the batch, and when the compute per step is
        small, the job waits on the interconnect. More GPUs make it worse, not better.

    Example
        model = DDP(model)            # 300M parameters, per-rank batch 2, 8 GPUs over 10 GbE
        for x, y in loader: loss_fn(model(x), y).backward(); opt.step()

    Fix
        # more work per all-reduce: accumulate N micro-batches inside model.no_sync(), or a larger batch
        # fewer bytes: model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        # on GPUs: backend="nccl" and a fast interconnect (NCCL_DEBUG=INFO: NET/IB, not NET/Socket)
    """
    sec = _run(snap)
    paced = _paced_by(sec, "collective")
    if paced is None:
        return
    fws = [r.get("framework") for r in paced["rows"] if isinstance(r.get("framework"), dict)]
    backends = sorted({str(f.get("backend"))[:64] for f in fws if f.get("backend")})
    extra = f"The process group's backend: {', '.join(backends)}." if backends else ""
    first = None
    own = _own_collectives_per_step(paced["rows"])
    if own is not None:  # the job's own calls, not DDP's gradient all-reduce (the recorder counts user-level calls)
        n, line, op, size = own
        extra = (f"Besides DDP's gradient all-reduce, the job's own code issues about {n:.0f} collectives per step "
                 f"(the recorder's count of user-level calls; the latest: {op} of {size} at {line}): many small "
                 "collectives, each paying the round trip's latency whatever its size. " + extra)
        first = (f"batch the job's own per-step collectives ({op} at {line}): stack the values into one tensor and reduce "
                 "it once (torch.stack([...]); dist.all_reduce(t)), and only every N steps")
    elif backends == ["gloo"]:
        first = ("the group runs on gloo: on GPUs, init_process_group(backend=\"nccl\") "
                 "(gloo is torch's backend for CPU training)")
    yield _pace_finding(paced, "collective", "the collectives set the pace", extra, first)


OWN_COLLECTIVES_PER_STEP = 4  # more user-level collectives per optimizer step than a Trainer's own (its token count)


def _own_collectives_per_step(rows: list) -> Optional[tuple]:
    """(collectives per step, the most frequent line of the latest ones, its op, its size) when every rank's own code
    issued at least OWN_COLLECTIVES_PER_STEP user-level collectives per optimizer step (the recorder's sequence number
    over its steps; DDP's gradient all-reduce runs in C++ and is not among them); else None."""
    from collections import Counter

    rates, lines = [], Counter()
    for r in rows:
        seq = (r.get("last_collective") or {}).get("seq")
        step = r.get("step")
        if not isinstance(seq, int) or not isinstance(step, int) or step <= 0:
            return None
        rates.append(seq / step)
        for c in r.get("coll_history") or []:
            if c.get("line"):
                lines[(c["line"], c.get("op"), c.get("bytes"))] += 1
    if not rates or min(rates) < OWN_COLLECTIVES_PER_STEP or not lines:
        return None
    (line, op, size), _ = lines.most_common(1)[0]
    file, _, n = str(line).rpartition(":")
    where = f"{_short(file)}:{n}" if file else str(line)
    return sorted(rates)[len(rates) // 2], where, op, (f"{size} bytes" if isinstance(size, int) else "unknown size")


@check("RUN031", "between-steps-bound", family=FAMILY, when=("run",), needs=("run",), catalogue=("F13",))
def between_steps_bound(snap):
    """Every rank spends most of its step in the loop's own code between steps, and no rank is slower.

    What it checks
        At the end of a job, each rank's step split over its measured steps (start-up left out): the
        "other" part (outside the DataLoader's fetch, forward, backward, collectives and the optimizer
        step) against the step's median. Every rank at or above half the step, over at least 10
        measured steps, with no stall, no death and no straggler.

    Why it matters
        The model and the GPUs idle while the loop logs, saves, evaluates or waits in a wrapper around
        the loader at every step. Faster hardware or more ranks change nothing; the loop does.

    Example
        for step, batch in enumerate(loader):
            ...; optimizer.step()
            torch.save(model.state_dict(), "last.pt")     # every step

    Fix
        # save, log and evaluate every N steps; find the line with py-spy dump --pid <a rank's pid>
    """
    sec = _run(snap)
    paced = _paced_by(sec, "other")
    if paced is None:
        return
    yield _pace_finding(paced, "other", "the loop's own code between steps sets the pace")
