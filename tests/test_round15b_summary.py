"""Issue 26, "say what you do not know": a clean report claims health only for what it judged. Checks skipped for
want of a fact this command gathers (no NVIDIA driver, --no-comm, not one rank of a launched job, a failed gatherer)
are named in the summary, grouped by why, and in the JSON report's `not_judged`; checks whose facts belong to another
command (probe, preflight's runtime sections, `run`, lint without --script) are not. Pure functions on recorded
snapshots (fixtures/snapshots) and literal reports: no process is started."""
import json

from factory import fixture_snapshot

from ddpdoctor.model import INFO, NO_SCRIPT, WARNING, Finding, Report, Skipped
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.render import render, summary_line

NO_DRIVER = "no NVIDIA driver found (NVML library not loaded)"
NO_COMM = "the connectivity test was not run: --no-comm"


def _report(skipped, findings=(), command="check"):
    return Report(command, findings=list(findings), skipped=list(skipped), checks_run=40)


def test_clean_report_with_material_skips_names_them_and_claims_no_health():
    rep = _report([Skipped("GPU002", NO_DRIVER, "gpu", "gpus"), Skipped("GPU003", NO_DRIVER, "gpu", "gpus"),
                   Skipped("PKG003", NO_DRIVER, "packages", "gpus"), Skipped("COMM001", NO_COMM, "comm", "comm")])
    line = summary_line(rep)
    assert "No issues found!" not in line
    assert line.startswith("No problems in what was judged. 40 checks ran, 4 skipped. Not judged: ")
    # grouped by why, in family order: one clause for the driver (two families), one for --no-comm
    assert f"GPUs and topology, Installed packages ({NO_DRIVER}); Connectivity test ({NO_COMM})." in line
    doc = json.loads(render(rep, "json"))
    assert doc["not_judged"] == [
        {"family": "gpu", "reason": NO_DRIVER, "checks": 2, "in_part": False},
        {"family": "packages", "reason": NO_DRIVER, "checks": 1, "in_part": False},
        {"family": "comm", "reason": NO_COMM, "checks": 1, "in_part": False}]
    # a family some of whose checks ran is named with the count not judged
    rep.families = ["gpu"]
    assert f"GPUs and topology [2 checks], Installed packages ({NO_DRIVER})" in summary_line(rep)
    assert set(doc["summary"]) == {"errors", "warnings", "infos", "checks_run", "checks_skipped"}  # contract kept


def test_skips_owned_by_other_commands_keep_no_issues_found():
    rep = _report([Skipped("PRB001", "measured by a training run", "probe", "probe"),
                   Skipped("RT001", "runtime facts are read inside the training process", "trainer", "runtime_data"),
                   Skipped("LINT000", NO_SCRIPT, "lint", "lint"),
                   Skipped("LINT000", "no 'lint' facts in this snapshot", "lint", "lint")],
                  findings=[Finding(INFO, "a note").stamped("SYS008", "cpu-affinity-narrow", "system")])
    assert summary_line(rep) == "No issues found! (1 note) 40 checks ran, 4 skipped."
    assert rep.not_judged() == []


def test_material_depends_on_the_command_and_on_what_was_asked():
    probe_gap = Skipped("PRB001", "the probe ran no step", "probe", "probe")
    assert probe_gap.material("probe") and not probe_gap.material("check")
    assert Skipped("RT001", "preflight() was given no trainer", "trainer", "runtime_trainer").material("preflight")
    # --script given and the lint section failed: the script was not judged
    assert Skipped("LINT000", "the 'lint' facts could not be gathered: SyntaxError", "lint", "lint").material("check")
    assert Skipped("X001", "why unknown").material("check")  # section not known: claim less, not more


def test_report_with_findings_also_says_what_was_not_judged():
    rep = _report([Skipped("COMM001", NO_COMM, "comm", "comm")],
                  findings=[Finding(WARNING, "w").stamped("SYS001", "shm-too-small", "system")])
    line = summary_line(rep)
    assert line.startswith("Doctor found issues in 1 category") and line.endswith(f"Not judged: Connectivity test ({NO_COMM}).")


def test_recorded_cpu_snapshot_names_gpu_and_comm_not_judged():
    """fixtures/snapshots/cpu-only.json (no NVML) replayed with --snapshot: GPU checks and comm not judged."""
    rep = judge(fixture_snapshot("cpu-only"), "check")
    fams = {x["family"] for x in rep.not_judged()}
    assert {"gpu", "comm"} <= fams and "probe" not in fams and "lint" not in fams
    assert "No issues found!" not in summary_line(rep)


def test_recorded_gpu_snapshot_groups_reasons_per_family_and_claims_health_only_when_all_ran():
    """fixtures/snapshots/dgx-a100-8x-nvswitch.json (a recorded DGX, no xid/cuda/siblings sections) with --no-comm:
    the GPU family is named once with both reasons; the same snapshot judged only on checks whose facts it holds
    (--only) says "No issues found!"."""
    snap = fixture_snapshot("dgx-a100-8x-nvswitch", edit=lambda s: s.update(comm={"unavailable": NO_COMM}))
    rep = judge(snap, "check")
    assert {"family": "comm", "reason": NO_COMM, "checks": 15, "in_part": False} in rep.not_judged()
    line = summary_line(rep)
    assert ("GPUs and topology [1 check] (no 'xid' facts in this snapshot and no 'cuda' facts in this snapshot)" in line
            and line.count("GPUs and topology") == 1), line
    quiet = judge(fixture_snapshot("dgx-a100-8x-nvswitch"), "check", only={"GPU002", "GPU005", "GPU006", "GPU008"})
    assert quiet.not_judged() == [] and summary_line(quiet) == "No issues found! 4 checks ran, 0 skipped."


# ---------------------------------------------------------------- ENV013: num_processes is the total over machines
# (after batch 73's first read: huggingface/accelerate#218 answered 1 process for 2 machines). Recorded fixture
# rtx4090-4x-no-p2p with the accelerate config section check gathers.

def _accel(values):
    from factory import findings_of

    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: s["host"].update(accelerate_config={
        "path": "~/.cache/huggingface/accelerate/default_config.yaml", "values": values}))
    return [f for f in findings_of(snap, "ENV013")]


def test_env013_fewer_processes_than_machines_is_an_error_and_a_remainder_a_warning():
    zero = _accel({"distributed_type": "MULTI_GPU", "num_machines": 2, "num_processes": 1})
    assert [f.severity for f in zero] == ["error"] and "0 processes per machine" in zero[0].title
    uneven = _accel({"distributed_type": "MULTI_GPU", "num_machines": 4, "num_processes": 10})
    assert [f.severity for f in uneven] == ["warning"] and "each machine starts 2, 8 in all" in uneven[0].title


def test_env013_total_that_divides_evenly_or_one_machine_is_quiet():
    assert _accel({"distributed_type": "MULTI_GPU", "num_machines": 2, "num_processes": 8}) == []
    assert _accel({"distributed_type": "MULTI_GPU", "num_machines": 1, "num_processes": 1}) == []
    assert _accel({"distributed_type": "MULTI_GPU", "num_machines": 2}) == []  # no count: nothing to judge
