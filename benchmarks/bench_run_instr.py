"""What the attach's hooks cost per optimizer step, in instructions: a deterministic measure (issue 27).

The wall-clock A/Bs of bench_run.py (time-sliced jobs, hooks toggled inside one job) are what a user
pays, but on a loaded machine their A/A spreads reach several points, so a change of one point in the
hooks' cost cannot be told from noise there. This bench counts instructions instead (Valgrind's
callgrind, an instruction count that does not depend on the load): one rank (a Gloo world of one,
DistributedDataParallel over the tiny job's Linear(8, 1), SGD, a DataLoader of batch 4) under the attach
(the same sitecustomize `ddpdoctor run` sets), its hooks switched off and on in blocks of `--block`
optimizer steps inside the one process (as trainer_job.py --toggle-attach does: the recorder's off
switch and its armed hooks), a callgrind dump at the end of every block. Per step: the instructions of
the blocks with the hooks on and of those with them off, in the same run; the hooks' cost is their
difference, and its ratio to the bare step (hooks off). The sampling of the split is fixed at every
`--every` steps (DDPDOCTOR_RUN_SPLIT_EVERY; the tiny job's k is 32) and no step counts as long
(recorder.SPLIT_EVERY_S raised in the child: under callgrind every step would otherwise take 50 ms and
the full path), so the paths taken are those of a job of fast steps: unsampled steps on the fast path,
one sampled step and the step before it (which installs the split's hooks) per `--every`.

What this does not see: the cost of the same instructions run cold in a real job (the step's compute
evicts the caches; each entry into the attach then costs several times its instructions), and the
`run` parent's share of the cores. It is the bisection measure, not the overhead figure: the figure is
bench_run.py's, on a quiet machine.

`--root DIR` measures another checkout's ddpdoctor (e.g. a `git archive` of an older commit) with this
harness, so that commits are compared under one harness.

    python benchmarks/bench_run_instr.py [--block 64] [--rounds 4] [--every 32] [--warm 512] [--root DIR] [--trainer] [--flight-recorder] [--cache-sim]

Needs valgrind (callgrind) and a C compiler with valgrind/callgrind.h (for the client requests that
dump at block ends); says so and exits 2 without them.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from ddpdoctor import proctree  # noqa: E402 - the one way the doctor starts and ends processes

CG_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_dump(const char *what) { CALLGRIND_DUMP_STATS_AT(what); }
"""

# Hooks off/on inside the child without restarting it (both children use it): the fast paths read S.off, and the
# split's hooks are re-armed through recorder._arm where the tree has it
SWITCH = r"""
def switch(off):
    S = recorder.S
    if off != S.off:
        S.off = off
        arm = getattr(recorder, "_arm", None)
        if arm is not None:
            arm(False if off else S.spl)
        if BARE:
            bare_out(off)

_PLACED = []  # (owner, name, wrapper, original) of the attach's wrappers installed for good, found at the first switch
_POST = []  # [hooks dict, key, hook]: the recorder's global optimizer post hook

def bare_out(off):
    # --bare-off (round 11): the "off" blocks without the wrappers the attach leaves in place (they would otherwise
    # pass each call through there too, and their call overhead would be in neither side of the difference)
    import sys
    if not _PLACED and not _POST:
        owners = []
        for mod, names in (("torch.utils.data.dataloader", ("_BaseDataLoaderIter",)),
                           ("transformers.trainer_callback", ("CallbackHandler",)),
                           ("accelerate.data_loader", ("DataLoaderShard", "DataLoaderDispatcher")),
                           ("torch.nn.parallel.distributed", ("DistributedDataParallel",))):
            m = sys.modules.get(mod)
            owners += [getattr(m, n) for n in names if m is not None and hasattr(m, n)]
        for owner in owners:
            for name, value in list(vars(owner).items()):
                orig = getattr(value, "__wrapped__", None)
                if getattr(value, "__ddpdoctor_wrapped__", False) and orig is not None:
                    _PLACED.append((owner, name, value, orig))
        opt = sys.modules.get("torch.optim.optimizer")
        hooks = getattr(opt, "_global_optimizer_post_hooks", {})
        for key, hook in list(hooks.items()):
            if hook is getattr(recorder, "_on_optimizer_step", None):
                _POST[:] = [hooks, key, hook]
    for owner, name, wrapper, orig in _PLACED:
        now = vars(owner).get(name)
        if now is wrapper or now is orig:  # an armed one (DDP's forward) is the original already while off
            setattr(owner, name, orig if off else wrapper)
    if _POST:
        hooks, key, hook = _POST
        if off:
            hooks.pop(key, None)
        else:
            hooks[key] = hook
"""

# The rank: a Gloo world of one, the tiny job's model and loader, a hand-written loop (the Trainer's own
# per-step work would hide nothing but add minutes under callgrind). Blocks of BLOCK steps, hooks off
# then on, ROUNDS times, after WARM steps with the hooks on; a dump named off/on at each block's end.
CHILD = r"""
import ctypes, os, socket, sys
import torch, torch.distributed as dist
from ddpdoctor.run import recorder
lib = ctypes.CDLL(sys.argv[1])
BLOCK, ROUNDS, WARM, MICRO = (int(a) for a in sys.argv[2:6])
BARE = os.environ.get("BENCH_RUN_INSTR_BARE_OFF") == "1"
recorder.SPLIT_EVERY_S = 1e9  # no step is long: under callgrind each would be (see the module's docstring)
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo", rank=0, world_size=1)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
loader = torch.utils.data.DataLoader(data, batch_size=4)

def steps():
    while True:
        for x, y in loader:
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            yield

""" + SWITCH + r"""
it = steps()
for _ in range(WARM):
    next(it)
import gc
gc.collect()
gc.freeze()  # round 14: the start-up's objects out of the collector's way, as in --trainer (see measure)
lib.cg_start()
for r in range(ROUNDS):
    for side in ("off", "on"):
        lib.cg_dump(b"start")  # the counts from here on are this block's
        switch(side == "off")  # the block's state (its own cost, a few calls, lands in the block)
        for _ in range(BLOCK):
            next(it)
        lib.cg_dump(side.encode())
# The fast paths alone, MICRO calls each against the same calls of what they wrap: the optimizer's post
# hook on an unsampled step (against an empty function of its signature) and the DataLoader's
# __next__ on such a step (against the bare one). Exact to a few instructions, where a block's count
# is exact to a few thousand per step.
S = recorder.S
switch(False)
S.due, S.spl = 1 << 62, False
if hasattr(type(S), "nb_lim"):  # round 16: the allowance is a limit on S.nb; before it, dl_free counted down
    S.nb, S.nb_lim = 0, 1 << 62
else:
    S.dl_free = 1 << 62
hook = recorder._on_optimizer_step
def empty(optimizer, args, kwargs):
    return None
for name, f in (("hook", hook), ("hook_base", empty)):
    lib.cg_dump(b"start")
    for _ in range(MICRO):
        f(opt, (), {})
    lib.cg_dump(name.encode())
base = torch.utils.data.dataloader._BaseDataLoaderIter
wrapped = base.__next__
bare = getattr(wrapped, "__wrapped__", wrapped)
micro_loader = torch.utils.data.DataLoader(list(range(MICRO)), batch_size=1)
# round 23 (run25): one iterator of it before the counts, so that both sides below start a new epoch of a loader the
# attach has seen; the first iterator of a NEW loader takes the once-per-loader path (its cold record, the line that
# made it), which the "batch" side alone paid (~1-2M instructions, spread over MICRO batches as a per-batch cost)
for _ in micro_loader:
    break
for name, f in (("batch", wrapped), ("batch_base", bare)):
    base.__next__ = f
    lib.cg_dump(b"start")
    for _ in micro_loader:
        pass
    lib.cg_dump(name.encode())
base.__next__ = wrapped
dist.destroy_process_group()
"""


# --trainer: the tiny job's own Trainer (fixtures/run/trainer_job.py's Tiny and Rows, batch 4, CPU, a Gloo world
# of one: DDP) with what the attach adds to a Trainer (DoctorCallback, accelerate's loader wrapped); the blocks are
# switched and dumped from a callback's on_step_end (after the optimizer step, as trainer_job --toggle-attach).
TRAINER_CHILD = r"""
import ctypes, gc, os, socket, sys, tempfile
sys.path.insert(0, sys.argv[6])
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
# torchrun's variables for a world of one: the Trainer joins a Gloo group and wraps the model in DDP, the
# recorder's phase is "run" (the fast paths' phase byte is stored), as in the tiny job's ranks
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
                  LOCAL_WORLD_SIZE="1")
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from trainer_job import Rows, Tiny
from ddpdoctor.run import recorder
lib = ctypes.CDLL(sys.argv[1])
BLOCK, ROUNDS, WARM, MICRO = (int(a) for a in sys.argv[2:6])
BARE = os.environ.get("BENCH_RUN_INSTR_BARE_OFF") == "1"
recorder.SPLIT_EVERY_S = 1e9
plan = [("off" if i % 2 == 0 else "on") for i in range(2 * ROUNDS)]

""" + SWITCH + r"""
class Blocks(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        n = state.global_step - WARM
        if n == 0:
            gc.collect()
            gc.freeze()  # the objects of the start-up out of the collector's way (see measure)
            lib.cg_start()
        if n >= 0 and n % BLOCK == 0:
            i = n // BLOCK
            if i > 0:
                lib.cg_dump(plan[i - 1].encode())
            lib.cg_dump(b"start")
            if i < len(plan):
                switch(plan[i] == "off")

torch.manual_seed(0)
out = tempfile.mkdtemp()
targs = TrainingArguments(output_dir=out, max_steps=WARM + 2 * ROUNDS * BLOCK, per_device_train_batch_size=4,
                          use_cpu=True, report_to=[], save_strategy="no", logging_steps=10 ** 9, disable_tqdm=True,
                          dataloader_num_workers=0)
Trainer(model=Tiny(), args=targs, train_dataset=Rows(), callbacks=[Blocks()]).train()
"""


def build_helper(tmp: str):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which("valgrind"):
        return None, "needs valgrind and a C compiler"
    src = os.path.join(tmp, "cg.c")
    with open(src, "w") as fh:
        fh.write(CG_C)
    so = os.path.join(tmp, "libcg.so")
    done = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src], capture_output=True, text=True)
    if done.returncode != 0:
        return None, "could not build the callgrind client-request helper: " + done.stderr.strip()[-300:]
    return so, None


def totals(path: str) -> int:
    """The instruction count of one callgrind dump (its `totals:` or `summary:` line)."""
    with open(path) as fh:
        for line in fh:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def event_totals(path: str) -> dict:
    """{event: count} of one callgrind dump: its `events:` line names the `totals:` line's columns (Ir alone, or
    with --cache-sim=yes Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw)."""
    names, vals = None, None
    with open(path) as fh:
        for line in fh:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith(("totals:", "summary:")):
                vals = [int(x) for x in line.split()[1:]]
                break
    if not names or vals is None:
        raise ValueError(f"no events/totals in {path}")
    return dict(zip(names, vals + [0] * (len(names) - len(vals))))


def read_events(out_dir: str) -> list:
    """[(trigger name, {event: count})] in dump order, threads summed (as read_dumps)."""
    dumps: dict = {}
    for path in glob.glob(os.path.join(out_dir, "callgrind.out.*.*")):
        n = path.rsplit(".", 1)[1].split("-", 1)[0]
        if not n.isdigit():
            continue
        trigger = ""
        with open(path) as fh:
            for line in fh:
                if line.startswith("desc: Trigger: Client Request:"):
                    trigger = line.rsplit(":", 1)[1].strip()
                    break
        name, ev = dumps.get(int(n), ("", {}))
        for k, v in event_totals(path).items():
            ev[k] = ev.get(k, 0) + v
        dumps[int(n)] = (name or trigger, ev)
    return [dumps[n] for n in sorted(dumps)]


def cache_per_step(rows: list, block: int) -> dict:
    """--cache-sim (round 14, wave 2): per optimizer step, each simulated event's hooks-on minus hooks-off count
    (L1 and last-level misses: what the instructions cost beyond their count when the step's compute has evicted
    the caches; and the simulated branch mispredictions, Bcm and Bim), and KCachegrind's rough cycle estimate,
    Ir + 10 x L1 misses + 100 x LL misses + 10 x mispredictions, beside the bare step's."""
    on = [ev for name, ev in rows if name == "on"]
    off = [ev for name, ev in rows if name == "off"]
    if not on or len(on) != len(off):
        raise ValueError("unpaired dumps")
    keys = sorted(set().union(*on, *off))
    mean = lambda evs, k: sum(e.get(k, 0) for e in evs) / (len(evs) * block)  # noqa: E731
    hooks = {k: round(mean(on, k) - mean(off, k), 1) for k in keys}
    bare = {k: round(mean(off, k), 1) for k in keys}

    def est(d):
        l1 = d.get("I1mr", 0) + d.get("D1mr", 0) + d.get("D1mw", 0)
        ll = d.get("ILmr", 0) + d.get("DLmr", 0) + d.get("DLmw", 0)
        return d.get("Ir", 0) + 10 * l1 + 100 * ll + 10 * (d.get("Bcm", 0) + d.get("Bim", 0))
    out = {"hooks_per_step": hooks, "bare_per_step": bare, "hooks_est_cycles": round(est(hooks)),
           "bare_est_cycles": round(est(bare))}
    out["hooks_est_pct_of_bare_step"] = round(100 * est(hooks) / est(bare), 3) if est(bare) else None
    return out


def read_dumps(out_dir: str) -> list:
    """[(trigger name, instructions)] in dump order. Callgrind writes dump N as callgrind.out.PID.N, and
    with --separate-threads one file per thread, callgrind.out.PID.N-TT: a dump's count is the sum of
    its threads' (the hooks run in the main thread, but nothing is left out)."""
    dumps: dict = {}
    for path in glob.glob(os.path.join(out_dir, "callgrind.out.*.*")):
        tail = path.rsplit(".", 1)[1]
        n = tail.split("-", 1)[0]
        if not n.isdigit():
            continue
        trigger = ""
        with open(path) as fh:
            for line in fh:
                if line.startswith("desc: Trigger: Client Request:"):  # "desc: Trigger: Client Request: off"
                    trigger = line.rsplit(":", 1)[1].strip()
                    break
        name, ir = dumps.get(int(n), ("", 0))
        dumps[int(n)] = (name or trigger, ir + totals(path))
    return [dumps[n] for n in sorted(dumps)]


def per_step(rows: list, block: int) -> dict:
    """Per optimizer step: instructions with the hooks on and off (blocks of `block` steps), the
    hooks' cost (on - off) and its share of the bare step; per round too, to show the spread."""
    on = [ir for name, ir in rows if name == "on"]
    off = [ir for name, ir in rows if name == "off"]
    if not on or len(on) != len(off):
        raise ValueError(f"unpaired dumps: {rows}")
    on_s, off_s = sum(on) / (len(on) * block), sum(off) / (len(off) * block)
    rounds = [round(100 * (a - b) / b, 3) for a, b in zip(on, off)]
    per_round = [round((a - b) / block) for a, b in zip(on, off)]
    import statistics

    # round 14: the rounds' own spread beside the figure: two trees compare only beyond it (round 13's
    # "+8%", 9,475 -> 10,222, lay inside one run's spread of ~1,700 instructions per step)
    return {"median_round_pct": statistics.median(rounds), "per_round_instr": per_round,
            "round_spread_instr": max(per_round) - min(per_round),"on_instr_per_step": round(on_s), "off_instr_per_step": round(off_s),
            "hooks_instr_per_step": round(on_s - off_s), "hooks_pct_of_bare_step": round(100 * (on_s - off_s) / off_s, 3),
            "per_round_pct": rounds, "blocks": len(on), "block": block}


def child_env(root: str, run_dir: str, every: int, flight_recorder: bool = False, bare_off: bool = False) -> dict:
    """The measured child's environment: the attach as `run` sets it up (its sitecustomize first on the path), the
    split sampled every `every` steps, one hash seed, one thread; c10d's Flight Recorder off unless
    `flight_recorder` (see measure)."""
    site = os.path.join(root, "ddpdoctor", "run", "_site")
    env = dict(os.environ, DDPDOCTOR_RUN_DIR=run_dir, DDPDOCTOR_RUN_PREFLIGHT="0",
               DDPDOCTOR_RUN_SPLIT_EVERY=str(every), PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([site, root, os.environ.get("PYTHONPATH", "")]))
    if not flight_recorder:  # else the caller's environment decides, as in round 10's harness
        env["TORCH_FR_BUFFER_SIZE"] = "0"
    env["BENCH_RUN_INSTR_BARE_OFF"] = "1" if bare_off else "0"
    return env


def measure(root: str, block: int, rounds: int, every: int, warm: int, tmp: str, keep: str = "",
            micro: int = 4096, trainer: bool = False, flight_recorder: bool = False, bare_off: bool = False,
            cache_sim: bool = False) -> dict:
    """The child under callgrind; its dumps read back. The start-up's objects are frozen (gc.freeze) before the
    first block (in --trainer mode since round 11, in the plain child since round 14): with transformers loaded, a collection of the oldest generation
    walks hundreds of thousands of objects and lands in whichever block its allocation count falls (a
    first run put +2 points in one block of three); the blocks' median is reported beside the mean.
    c10d's Flight Recorder is off in the child (TORCH_FR_BUFFER_SIZE=0) unless `flight_recorder` (round 11): its
    buffer grows by moving every entry at its doubling points, ~108k and ~213k instructions, and in every run
    of round 10's default shape those moves fell in two "on" blocks of four (+1,250 instructions per step
    read as the hooks'; callgrind_annotate of main's dumps: std::vector moves of c10d entries), a cost of the
    collectives' count that the hooks do not change. Its per-collective record is left out of both sides."""
    so, why = build_helper(tmp)
    if so is None:
        return {"skipped": why}
    run_dir, out_dir = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
    env = child_env(root, run_dir, every, flight_recorder, bare_off)
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-line=no", "--separate-threads=yes",
           *(["--cache-sim=yes", "--branch-sim=yes"] if cache_sim else []),
           f"--callgrind-out-file={os.path.join(out_dir, 'callgrind.out.%p')}",
           sys.executable, "-c", TRAINER_CHILD if trainer else CHILD, so, str(block), str(rounds), str(warm), str(micro),
           os.path.join(ROOT, "fixtures", "run")]
    done = proctree.run(cmd, env=env, capture_output=True, text=True, timeout=3600, cwd=tmp)
    if done.returncode != 0:
        raise SystemExit(f"the measured rank failed ({done.returncode}): {done.stderr[-3000:]}")
    if keep:  # the dumps, for callgrind_annotate (which functions the difference is in)
        shutil.copytree(out_dir, keep, dirs_exist_ok=True)
    rows = [r for r in read_dumps(out_dir) if r[0] != "start"]
    extra = {"cache": cache_per_step(read_events(out_dir), block)} if cache_sim else {}
    if trainer:
        return dict(per_step([r for r in rows if r[0] in ("on", "off")], block), job="trainer", warm=warm,
                    flight_recorder=flight_recorder, bare_off=bare_off, root_is_this_checkout=os.path.realpath(root) == ROOT, **extra)
    ir = dict((name, n) for name, n in rows if name not in ("on", "off"))
    fast = {"optimizer_hook_unsampled_instr": round((ir["hook"] - ir["hook_base"]) / micro, 1),
            "batch_unsampled_instr": round((ir["batch"] - ir["batch_base"]) / micro, 1), "calls": micro}
    return dict(per_step([r for r in rows if r[0] in ("on", "off")], block), fast_paths=fast, every=every, warm=warm,
                flight_recorder=flight_recorder, bare_off=bare_off, root_is_this_checkout=os.path.realpath(root) == ROOT, **extra)


# Steps with the hooks on before the first measured block. Round 16 (docs/measured/run.md, "Round 16, wave 2"): at
# 128 the first rounds still carried warm-up (1,000-2,000 instructions per step above the later ones; the figure read
# 0.93% of the bare step where 512 read 0.80-0.82%, both trees); at 512 the rounds were steady. 512 is the default.
WARM = 512


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--block", type=int, default=64, help="steps per block (a multiple of --every)")
    p.add_argument("--rounds", type=int, default=4, help="off/on block pairs")
    p.add_argument("--every", type=int, default=32, help="the split's sampling period (the tiny job's k)")
    p.add_argument("--warm", type=int, default=WARM, help="steps with the hooks on before the first block (see WARM)")
    p.add_argument("--micro", type=int, default=4096, help="calls of each fast path alone")
    p.add_argument("--trainer", action="store_true",
                   help="the tiny job's Trainer (a Gloo world of one, DDP) instead of the hand-written loop; no fast paths alone")
    p.add_argument("--keep", default="", help="copy callgrind's dumps into this folder (callgrind_annotate them)")
    p.add_argument("--root", default=ROOT, help="the checkout whose ddpdoctor is measured (default: this one)")
    p.add_argument("--flight-recorder", action="store_true",
                   help="leave c10d's Flight Recorder on in the child (round 10's harness; see measure)")
    p.add_argument("--bare-off", action="store_true",
                   help="the 'off' blocks without the wrappers the attach leaves in place (DataLoader, accelerate, "
                        "CallbackHandler, the optimizer post hook): their call overhead counted as the hooks'")
    p.add_argument("--cache-sim", action="store_true",
                   help="callgrind's cache and branch simulation too: the hooks' L1/LL misses and mispredictions per step, a cycle estimate")
    return p


def main() -> int:
    args = parser().parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_run_instr-")
    try:
        res = measure(os.path.abspath(args.root), args.block, args.rounds, args.every, args.warm, tmp, args.keep, args.micro,
                      args.trainer, args.flight_recorder, args.bare_off, args.cache_sim)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res, indent=2))
    return 2 if "skipped" in res else 0


if __name__ == "__main__":
    sys.exit(main())
