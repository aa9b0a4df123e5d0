"""Literal `run` sections for the RUN checks: one rank record per call, healthy by default."""
from __future__ import annotations

import copy

from ddpdoctor.pipeline.runner import load_all, run_checks
from ddpdoctor.pipeline.snapshot import Snapshot

TRAIN = "/job/train.py"


def frame(line: int, code: str = "", guard: str = None, file: str = TRAIN, func: str = "main") -> dict:
    out = {"file": file, "line": line, "func": func}
    if code:
        out["code"] = code
    if guard:
        out["guard"] = guard
    return out


def rank(n: int, state: str = "backward", line: int = 40, code: str = "loss.backward()", step: int = 3,
         coll: dict = None, dl: dict = None, workers: list = None, **kw) -> dict:
    doing = {"backward": "the DDP gradient all-reduce (backward)", "rendezvous": "init_process_group (rendezvous)",
             "before-init": "start-up, before init_process_group", "outside": "outside any collective",
             "data": "loading a batch in the rank", "data-workers": "waiting for a batch from DataLoader workers"}
    rec = {"rank": n, "pid": 100 + n, "host": "node0", "phase": "run", "state": state, "since_s": 5.0, "step": step,
           "last_collective": coll, "collectives": (coll or {}).get("seq", 0), "dataloader": dl or
           {"n": 4, "len": 8, "end": False, "workers": 0}, "user_frame": frame(line, code, kw.pop("guard", None)),
           "stack": None, "pg_timeout_s": 1800.0, "rss_mb": 300.0, "alive": True, "workers": workers or []}
    if state == "collective":
        c = coll or {}
        shape = f" shape {c.get('shape')} {c.get('dtype')}" if c.get("shape") is not None else ""
        rec["doing"] = f"{c.get('op')} #{c.get('seq')}{shape}"
    else:
        rec["doing"] = doing.get(state, state)
    rec.update(kw)
    return rec


def proc(pid: int, rank: int, step: int = 3, **kw) -> dict:
    """One rank's process record as run/section.build reads it (ended at 50.0 unless kw says otherwise)."""
    d = {"pid": pid, "info": {"kind": "proc", "ppid": 1, "env": {"RANK": str(rank)}},
         "beacon": {"phase": "run", "rank": rank, "step": step}, "alive": False, "end_t": 50.0}
    d.update(kw)
    return d


def coll(op: str = "barrier", seq: int = 1, shape=None, dtype=None, line: int = 30) -> dict:
    return {"seq": seq, "op": op, "shape": shape, "dtype": dtype, "line": f"{TRAIN}:{line}", "in": True}


def section(ranks: list, stall: bool = True, death: dict = None, mismatch: dict = None, **kw) -> dict:
    sec = {"ranks": copy.deepcopy(ranks), "launcher": "torchrun", "stall_after_s": 5.0,
           "stall": {"idle_s": 5.2, "stall_after_s": 5.0} if stall else None, "mismatch": mismatch}
    if death:
        sec["death"] = death
    sec.update(kw)
    return sec


def findings(sec: dict, check_id: str = None) -> list:
    load_all(plugins=False)
    from ddpdoctor.model.registry import REGISTRY

    only = {check_id} if check_id else {s.id for s in REGISTRY.values() if s.family == "run"}
    found, _, _ = run_checks(Snapshot(sections={"run": sec}), only=only, when="run")
    return found


def fake_dataloader():
    """Fresh stand-ins for torch's DataLoader (a list with num_workers and batch_size) and its _BaseDataLoaderIter (as
    the recorder's hook sees it), for `recorder._patch_dataloader(SimpleNamespace(_BaseDataLoaderIter=Base))`: new
    classes per call, since the patch rewrites the iterator class in place. Returns (Base, Loader)."""

    class Base:  # torch's _BaseDataLoaderIter, as the hook sees it
        def __init__(self, loader):
            self.items = iter(loader)

        def __next__(self):
            return next(self.items)

    class Loader(list):
        num_workers, batch_size = 0, 1

    return Base, Loader


def hooked_recorder(monkeypatch):
    """The recorder's DataLoader hook on stand-in loaders (fake_dataloader), in this process, from a fresh recorder
    state (every slot restored by `monkeypatch` afterwards; no job launched). Returns (S, Base, Loader): the
    recorder's state and the two stand-in classes."""
    import types

    from ddpdoctor.run import recorder

    Base, Loader = fake_dataloader()
    S = recorder.S
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))
    for name, value in (("writer", None), ("mm", None), ("off", False), ("kind", "proc"), ("inside", False),
                        ("spl", False), ("armed", False), ("ring", False), ("spl_every", 4), ("phase", "run"),
                        ("dl", None), ("dl_desc", None), ("dl_tr", None), ("nb", 0), ("nb_lim", 100), ("step", 0),
                        ("due_step", 0), ("due_t", 0.0)):
        setattr(S, name, value)
    monkeypatch.setattr(recorder, "_arm", lambda on: None)
    recorder._patch_dataloader(types.SimpleNamespace(_BaseDataLoaderIter=Base))
    return S, Base, Loader


def sampled_split(monkeypatch, part: int):
    """The recorder inside a sampled step with `part` of the split open and a fake clock (every field of the recorder's
    state comes back after the test): (S, clock), clock[0] the time _sp reads."""
    from ddpdoctor.run import recorder

    S = recorder.S
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))
    clock = [100.0]
    for name, value in (("spl", True), ("sp", part), ("sp_t", 100.0), ("sp_acc", [0.0] * recorder.NPARTS),
                        ("off", False), ("kind", "proc"), ("main", recorder._ident()), ("is_compiling", None)):
        setattr(S, name, value)
    monkeypatch.setattr(recorder._sp, "__defaults__", (lambda: clock[0],))
    return S, clock
