"""benchmarks/bench_run_instr.py's reading of callgrind's dumps (pure: written files, no valgrind)."""
import os
from bench_modules import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bri = load("bench_run_instr")


def _dump(path, trigger, ir):
    with open(path, "w") as fh:
        fh.write(f"# callgrind format\nversion: 1\ndesc: Trigger: {trigger}\n\nsummary: {ir}\n\nfn=x\n0 {ir}\ntotals: {ir}\n")


def test_dumps_are_read_in_order_and_their_threads_summed(tmp_path):
    _dump(tmp_path / "callgrind.out.7.1-01", "Client Request: start", 5)
    _dump(tmp_path / "callgrind.out.7.2-01", "Client Request: off", 1000)
    _dump(tmp_path / "callgrind.out.7.2-02", "Program termination", 24)  # a second thread of dump 2
    _dump(tmp_path / "callgrind.out.7.3-01", "Client Request: on", 1100)
    _dump(tmp_path / "callgrind.out.7.10-01", "Client Request: hook", 7)
    _dump(tmp_path / "callgrind.out.7-01", "Program termination", 99)  # the final dump: not numbered, left out
    assert bri.read_dumps(str(tmp_path)) == [("start", 5), ("off", 1024), ("on", 1100), ("hook", 7)]


def test_per_step_is_the_on_off_difference_against_the_bare_step():
    rows = [("off", 64_000), ("on", 65_280), ("off", 64_000), ("on", 64_640)]
    out = bri.per_step(rows, 64)
    assert out["off_instr_per_step"] == 1000 and out["on_instr_per_step"] == 1015
    assert out["hooks_instr_per_step"] == 15 and out["hooks_pct_of_bare_step"] == 1.5
    assert out["per_round_pct"] == [2.0, 1.0]
    assert out["per_round_instr"] == [20, 10] and out["round_spread_instr"] == 10  # round 14: the spread beside it


def test_the_flight_recorder_is_off_in_the_child_unless_asked_for(monkeypatch):
    """Round 11: c10d's Flight Recorder buffer growth landed in the "on" blocks; the child runs without it by
    default, and --flight-recorder gives round 10's harness back (the caller's environment decides)."""
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    env = bri.child_env("/r", "/d", 32)
    assert env["TORCH_FR_BUFFER_SIZE"] == "0" and env["DDPDOCTOR_RUN_SPLIT_EVERY"] == "32"
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [os.path.join("/r", "ddpdoctor", "run", "_site"), "/r"]
    assert bri.child_env("/r", "/d", 32, flight_recorder=True)["TORCH_FR_BUFFER_SIZE"] == "2000"


def test_bare_off_takes_the_wrappers_left_in_place_out_of_the_off_blocks(monkeypatch):
    """--bare-off (round 11): the child's switch puts the originals back under every wrapper the attach left in
    place (and takes the optimizer post hook out) for an "off" block, and the wrappers back for an "on" one; a
    wrapper someone else replaced since is left alone."""
    import functools
    import sys
    import types

    def orig(self):
        return "orig"

    @functools.wraps(orig)
    def wrapper(self):
        return "wrapped"

    wrapper.__ddpdoctor_wrapped__ = True
    Handler = type("CallbackHandler", (), {"on_step_end": wrapper})
    Iter = type("_BaseDataLoaderIter", (), {"__next__": wrapper, "__init__": lambda self: None})
    post = lambda *a: None  # noqa: E731
    hooks = {7: post}
    for name, mod in (("transformers.trainer_callback", types.SimpleNamespace(CallbackHandler=Handler)),
                      ("torch.utils.data.dataloader", types.SimpleNamespace(_BaseDataLoaderIter=Iter)),
                      ("accelerate.data_loader", types.SimpleNamespace()),
                      ("torch.nn.parallel.distributed", types.SimpleNamespace()),
                      ("torch.optim.optimizer", types.SimpleNamespace(_global_optimizer_post_hooks=hooks))):
        monkeypatch.setitem(sys.modules, name, mod)
    ns = {"BARE": True, "recorder": types.SimpleNamespace(S=types.SimpleNamespace(off=False, spl=False),
                                                          _arm=lambda on: None, _on_optimizer_step=post)}
    exec(bri.SWITCH, ns)
    ns["switch"](True)
    assert Handler.on_step_end is orig and Iter.__next__ is orig and hooks == {}
    ns["switch"](False)
    assert Handler.on_step_end is wrapper and Iter.__next__ is wrapper and hooks == {7: post}
    Handler.on_step_end = lambda self: "theirs"
    ns["switch"](True)
    assert Handler.on_step_end(None) == "theirs" and Iter.__next__ is orig


def _cdump(path, trigger, vals):
    names = "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
    with open(path, "w") as fh:
        fh.write(f"# callgrind format\nversion: 1\ndesc: Trigger: {trigger}\nevents: {names}\n\nfn=x\n0 1\n"
                 f"totals: {' '.join(str(v) for v in vals)}\n")


def test_cache_sim_reads_each_event_and_charges_the_hooks_their_misses(tmp_path):
    """Round 14, wave 2 (--cache-sim): the simulated misses per step, hooks on minus off, and the cycle estimate
    (Ir + 10 x L1 misses + 100 x LL misses); a dump without misses (Ir alone) still reads."""
    _cdump(tmp_path / "callgrind.out.7.1-01", "Client Request: off", [64_000, 0, 0, 0, 640, 0, 0, 64, 0])
    _cdump(tmp_path / "callgrind.out.7.1-02", "Program termination", [64, 0, 0, 0, 0, 0, 0, 0, 0])  # a 2nd thread
    _cdump(tmp_path / "callgrind.out.7.2-01", "Client Request: on", [64_640, 0, 0, 64, 1280, 0, 0, 64, 0])
    rows = bri.read_events(str(tmp_path))
    assert [name for name, _ in rows] == ["off", "on"] and rows[0][1]["Ir"] == 64_064
    out = bri.cache_per_step(rows, 64)
    assert out["hooks_per_step"]["Ir"] == 9.0 and out["hooks_per_step"]["D1mr"] == 10.0
    assert out["hooks_per_step"]["DLmr"] == 0.0  # the same LL misses on and off: none charged to the hooks
    assert out["bare_est_cycles"] == 1001 + 10 * 10 + 100 * 1
    assert out["hooks_est_cycles"] == 9 + 10 * (1 + 10)  # the misses make the hooks' cost 13x their instructions
    assert bri.event_totals(str(tmp_path / "callgrind.out.7.1-01"))["D1mr"] == 640
    assert bri.cache_per_step([("off", {"Ir": 64, "Bcm": 0}), ("on", {"Ir": 128, "Bcm": 64})], 64)["hooks_est_cycles"] == 11


def test_the_default_warm_up_is_the_steady_one():
    """Round 17: the warm-up before the first block defaults to 512 steps (at 128 the first rounds still read
    1,000-2,000 instructions per step high, round 16); an explicit --warm still wins."""
    assert bri.parser().parse_args([]).warm == bri.WARM == 512
    assert bri.parser().parse_args(["--warm", "128"]).warm == 128
