"""Round 15 wave 2, issue 27: bench_run's exit code follows the three-way decision, and the Quiet goal (<= 1 false
alarm per 10,000 healthy steps across the healthy jobs of the benchmarks) is counted over every healthy job under
`run` that a bench leaves in its directory. Pure: recorded files and the real renderer of a live finding, no
process."""
import json
import os
import sys
from bench_modules import load

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    return load(name)


br = _load("bench_run")


def test_exit_code_follows_the_decision_and_the_other_goals():
    assert br.exit_code("met") == 0
    assert br.exit_code("not met") == 1
    assert br.exit_code("cannot resolve at this noise") == br.EXIT_CANNOT_RESOLVE == 3
    assert br.EXIT_CANNOT_RESOLVE != 2  # argparse's usage error
    assert br.exit_code("met", others_ok=False) == 1  # memory or stall latency over
    assert br.exit_code("cannot resolve at this noise", others_ok=False) == 1


def _slices_file(d, j, sides, stderr_text, n_steps, order="balanced", b_step=0.0100):
    """One saved pair of jobs as overhead_sliced leaves it: slices-*.json, the ranks' step files and, beside the rank-0
    step file of each side, the job's stderr (run_sliced). Quads of 1 s turns, 20 of them."""
    names = {"a": f"{sides[0]}-a{j}", "b": f"{sides[1]}-b{j}"}
    stats = {k: os.path.join(d, f"sliced-{names[k]}-{j}") for k in "ab"}
    slices, t = [], 0.0
    for q in range(10):
        for i, k in enumerate("abba" if q % 2 else "baab"):
            slices.append((names[k], t, t + 1.0, 2 * q + i // 2))
            t += 1.0
    for k, step in (("a", 0.0100), ("b", b_step)):
        rows, cpu = [], 0.0
        for who, s, e, _ in slices:
            if who == names[k]:
                x = s
                while x + step <= e:
                    x += step
                    cpu += step / 2
                    rows.append(f"{x:.6f} {cpu:.6f} 1000\n")
        rows = (rows * (1 + n_steps // max(1, len(rows))))[:max(n_steps, len(rows))] if n_steps else rows
        for r in (0, 1):
            with open(f"{stats[k]}.rank{r}.steps", "w") as fh:
                fh.writelines(rows)
        with open(f"{stats[k]}.rank0.steps.stderr", "w") as fh:
            fh.write(stderr_text if sides[0 if k == "a" else 1] == "run" else "bare job's own lines RUN020\n")
    with open(os.path.join(d, f"slices-{names['a']}-{names['b']}-{j}.json"), "w") as fh:
        json.dump({"slices": slices, "slice_cpu": [], "stats": stats, "names": names, "sides": list(sides),
                   "no_aslr": False, "width": 1024, "order": order, "commit": "abc"}, fh)
    return stats


def _main(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["bench_run.py", *argv])
    return br.main()


@pytest.mark.parametrize("b_step,control,code", [(0.01003, True, 0), (0.0103, True, 1), (0.01003, False, 3)])
def test_pool_exits_on_the_decision(tmp_path, monkeypatch, b_step, control, code):
    """met (+0.3%, control of 2 pairs): 0; not met (+3%): 1; no A/A control: cannot resolve, 3 (before round 15
    wave 2 the exit code read the centre, +0.3% met: 0)."""
    for j in (0, 1):
        _slices_file(str(tmp_path), 10 + j, ("bare", "run"), "", 0, b_step=b_step)
        if control:
            _slices_file(str(tmp_path), j, ("bare", "bare"), "", 0)
    assert _main(monkeypatch, "--pool", str(tmp_path)) == code


def _live(fid, title):
    from ddpdoctor.model import warning
    from ddpdoctor.run.text import render_findings

    f = warning(title, detail="the others wait for it", fix="look at rank 1", subjects=["rank:1"])
    return render_findings([f.stamped(fid, "slow-rank", "run")], "ddpdoctor run: straggler", {}) + "\n"


def test_live_alarms_count_the_printed_straggler_verdicts():
    text = ("[rank1]: Warning: find_unused_parameters=True ... RUN020 in a log line\n" + _live("RUN020", "rank 1 is the straggler")
            + "ddpdoctor run: straggler: RUN020 already reported above\n" + _live("RUN023", "rank 1 is held back by the host")
            + _live("RUN010", "rank 1 died"))
    assert br.live_alarms(text) == {"RUN020": 1, "RUN023": 1}
    assert br.live_alarms("ddpdoctor train_begin: 0 error(s)\n  ! warning RT037 cb: writes\n") == {"RUN020": 0, "RUN023": 0}


def test_quiet_tally_three_ways():
    job = lambda steps, alarms=0, held=0: {"kind": "k", "steps": steps, "RUN020": alarms, "RUN023": held}  # noqa: E731
    assert br.quiet_tally([job(40000), job(28912, held=1)])["decision"] == "met"  # 0 in 68,912: bound 0.43
    short = br.quiet_tally([job(5000)])
    assert short["decision"] == "cannot resolve at this noise" and short["upper95_per_10k"] > 1  # 0 in 5,000: 6.0
    noisy = br.quiet_tally([job(25000, 4), job(25000, 4)])
    assert noisy["decision"] == "not met" and noisy["per_10k_steps"] == 1.6
    assert br.quiet_tally([])["decision"] == "cannot resolve at this noise"


def test_quiet_saved_reads_the_run_side_toggled_and_straggler_jobs(tmp_path, monkeypatch):
    d = str(tmp_path)
    _slices_file(d, 0, ("bare", "bare"), "", 4000)  # the A/A: no job under run, not counted
    _slices_file(d, 1, ("bare", "run"), _live("RUN020", "rank 0 is the straggler"), 3000)
    with open(os.path.join(d, "toggle-1024-0-5.rank0.steps"), "w") as fh:
        fh.writelines(f"{i * 0.02:.3f} {i * 0.01:.3f} 1000 {(i // 20) % 2}\n" for i in range(200))
    with open(os.path.join(d, "toggle-1024-0-5.run.stderr"), "w") as fh:
        fh.write(_live("RUN023", "rank 1 is held back by the host"))
    with open(os.path.join(d, "healthy-7.json"), "w") as fh:
        json.dump({"findings": [], "run": {"ranks": [{"split": {"last": 1500}}, {"split": {"last": 1499}}]}}, fh)
    jobs = br.quiet_saved([d])
    assert [(j["kind"], j["steps"], j["RUN020"], j["RUN023"]) for j in jobs] == [
        ("sliced work", 3000, 1, 0), ("toggled (hooks on)", 100, 0, 1), ("straggler bench healthy", 1500, 0, 0)]
    assert _main(monkeypatch, "--quiet", d) == 1  # 1 in 4,600 steps: 2.2 per 10,000, not met
