"""Round 16 (issue 26): the launch command as facts, and a family judged in part marked as such.

`check` under a launcher reads its own launch: the launcher command lines of its parent chain (gather.launch, the
`launch` section), parsed by facts.launch into the launcher's own options. Checks read them: NET002/NET006/NET008
through facts.launch.launch_env (torchrun's PET_* view, the command line over the variables), the rank count on
this host (facts.ranks.local_ranks: SLURM tasks x --nproc-per-node in an srun step whose tasks each start torchrun;
ENV006, GPU016), ENV007 (srun tasks against the agents torchrun's --nnodes asks for). Pure functions on recorded
snapshots (fixtures/snapshots) and a fake /proc tree: no process is started."""
from factory import findings_of, fixture_snapshot

from ddpdoctor.facts.launch import launch_env, parse_command
from ddpdoctor.facts.ranks import local_ranks, threads_per_rank
from ddpdoctor.gather import Sources
from ddpdoctor.gather.launch import launch_commands
from ddpdoctor.model import INFO, WARNING, Finding, Report, Skipped
from ddpdoctor.pipeline.render import render

NO_XID = "no 'xid' facts in this snapshot"


def _launch(*argvs):
    cmds = [dict(parse_command(a), depth=i + 1) for i, a in enumerate(argvs)]
    return {"commands": cmds, "depth_read": len(cmds)}


# ---------------------------------------------------------------- parsing and gathering

def test_parse_command_keeps_the_launchers_options_not_the_scripts():
    t = parse_command(["torchrun", "--nnodes=2", "--nproc_per_node", "8", "--rdzv-backend", "c10d", "--standalone",
                       "train.py", "--nnodes", "9", "--hf_token", "secret"])
    assert t == {"launcher": "torchrun", "program": "train.py",
                 "options": {"nnodes": "2", "nproc_per_node": "8", "rdzv_backend": "c10d", "standalone": "1"}}
    m = parse_command(["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master_port", "12653", "t.py"])
    assert m["launcher"] == "torchrun" and m["options"] == {"nproc_per_node": "2", "master_port": "12653"}
    s = parse_command(["srun", "-N", "2", "-l", "--ntasks-per-node=2", "torchrun", "--nnodes", "2"])
    assert s == {"launcher": "srun", "options": {"nodes": "2", "ntasks_per_node": "2"}, "program": "torchrun"}
    a = parse_command(["/usr/bin/python3", "/opt/conda/bin/accelerate", "launch", "--multi_gpu", "--num_processes", "8", "t.py"])
    assert a["launcher"] == "accelerate" and a["options"] == {"multi_gpu": "1", "num_processes": "8"}
    assert parse_command(["deepspeed", "-H", "/job/hostfile", "train.py"])["options"] == {"hostfile": "/job/hostfile"}
    assert parse_command(["bash", "run.sh"]) is None and parse_command(["python", "train.py"]) is None


def test_gather_reads_the_parent_chain_nearest_first(tmp_path):
    def proc(pid, ppid, argv):
        d = tmp_path / "proc" / pid
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (x y) S {ppid} 1 1 0")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")

    proc("self", "300", ["python", "-m", "ddpdoctor", "check"])
    proc("300", "200", ["/usr/bin/python3", "/venv/bin/torchrun", "--nproc-per-node", "4", "-m", "ddpdoctor", "check"])
    proc("200", "100", ["/bin/bash", "job.sh"])
    proc("100", "1", ["srun", "--ntasks-per-node", "1", "bash", "job.sh"])
    got = launch_commands(Sources(environ={}, root=str(tmp_path)))
    assert [(c["launcher"], c["depth"]) for c in got["commands"]] == [("torchrun", 1), ("srun", 3)]
    assert got["commands"][0]["options"] == {"nproc_per_node": "4"} and got["commands"][0]["program"] == "ddpdoctor"
    assert got["depth_read"] == 3
    assert launch_commands(Sources(environ={}, root=str(tmp_path / "none"))) == {"commands": [], "depth_read": 0}


def test_launch_env_puts_the_command_over_the_variables():
    snap = fixture_snapshot("hgx-h100-8x", edit=lambda s: (s["env"]["vars"].update(PET_NNODES="1"),
                                                            s.update(launch=_launch(["torchrun", "--nnodes", "2", "t.py"]))))
    env = launch_env(snap)
    assert env["PET_NNODES"] == "2" and env["PET_RDZV_BACKEND"] == "static"  # torchrun's default backend
    alone = fixture_snapshot("hgx-h100-8x", edit=lambda s: s.update(launch=_launch(["torchrun", "--standalone", "t.py"])))
    assert launch_env(alone)["PET_RDZV_ENDPOINT"] == "localhost:0"
    assert launch_env(fixture_snapshot("hgx-h100-8x")) is not None and "PET_NNODES" not in launch_env(fixture_snapshot("hgx-h100-8x"))


# ---------------------------------------------------------------- checks reading the launch command

def _endpoint(host):
    cmd = ["torchrun", "--nnodes", "2", "--nproc_per_node", "8", "--rdzv_backend", "c10d", "--rdzv_endpoint",
           f"{host}:29500", "train.py"]
    return fixture_snapshot("hgx-h100-8x", edit=lambda s: s.update(launch=_launch(cmd)))


def test_net002_loopback_rendezvous_endpoint_on_the_launch_command():
    """nebius-solutions-library#177's class: a 2-node job whose --rdzv_endpoint is a loopback address."""
    found = [f for f in findings_of(_endpoint("127.0.1.1"), "NET002") if "rendezvous endpoint" in f.title]
    assert found and found[0].severity in ("warning", "error")
    assert not [f for f in findings_of(_endpoint("10.1.0.11"), "NET002") if "rendezvous endpoint" in f.title]


def test_env007_srun_tasks_each_starting_torchrun_recorded_fixture():
    """fixtures/snapshots/slurm-step-2-tasks-each-torchrun.json: 2 tasks per node x 2 nodes = 4 torchrun agents for
    --nnodes 2 (ultralytics/yolov5#12429's class); one task per node is quiet."""
    bad = [f for f in findings_of(fixture_snapshot("slurm-step-2-tasks-each-torchrun"), "ENV007") if f.severity == "error"]
    assert bad and "rendezvous holds 2 agents" in bad[0].title and "torchrun --nnodes 2" in bad[0].title
    assert not [f for f in findings_of(fixture_snapshot("slurm-step-1-task-torchrun"), "ENV007") if f.severity != INFO]


def test_ranks_and_threads_under_srun_torchrun_come_from_the_command():
    """ENV006 no longer counts SLURM tasks as ranks when each task starts torchrun: ranks = tasks x nproc, one thread."""
    snap = fixture_snapshot("slurm-step-2-tasks-each-torchrun")
    n, why = local_ranks(snap)
    assert n == 4 and "2 SLURM tasks" in why and local_ranks(snap).declared() == 4
    assert threads_per_rank(snap, 64, n)[0] == 1
    assert not findings_of(snap, "ENV006")
    # the same step without the launch command: SLURM's tasks are the ranks, torch's default threads each
    bare = fixture_snapshot("slurm-step-2-tasks-each-torchrun", edit=lambda s: s.pop("launch"))
    assert local_ranks(bare).value == 2 and threads_per_rank(bare, 64, 2)[0] == 64


def test_gpu016_counts_the_ranks_each_srun_task_starts():
    """2 tasks per node, each torchrun --nproc-per-node 4, on a 4-GPU node: 8 ranks for 4 GPUs (GPU016);
    the recorded fixture's 2 x 2 is quiet."""
    def more(s):
        s["launch"]["commands"][0]["options"]["nproc_per_node"] = "4"
    assert findings_of(fixture_snapshot("slurm-step-2-tasks-each-torchrun", edit=more), "GPU016")
    assert not findings_of(fixture_snapshot("slurm-step-2-tasks-each-torchrun"), "GPU016")


# ---------------------------------------------------------------- a family judged in part is marked [~]

def _rep(skipped, findings=()):
    return Report("check", findings=list(findings), skipped=list(skipped), checks_run=10, families=["gpu", "system"])


def test_family_judged_in_part_is_marked_in_text_and_markdown():
    rep = _rep([Skipped("GPU022", NO_XID, "gpu", "xid"), Skipped("GPU026", NO_XID, "gpu", "xid")])
    text = render(rep, "text")
    assert "[~] GPUs and topology (2 checks not judged)" in text and "[✓] Host: CPU, memory" in text
    md = render(rep, "markdown")
    assert "| [~] | GPUs and topology | 0 (2 checks not judged) |" in md


def test_family_with_a_warning_keeps_its_mark_and_a_fully_judged_family_stays_clean():
    warn = Finding(WARNING, "w").stamped("GPU010", "gpu-memory-in-use", "gpu")
    text = render(_rep([Skipped("GPU022", NO_XID, "gpu", "xid")], [warn]), "text")
    assert "[!] GPUs and topology (1 finding, 1 check not judged)" in text
    clean = render(_rep([]), "text")
    assert "[~]" not in clean and "[✓] GPUs and topology" in clean


# ---------------------------------------------------------------- after batches 75/76's first reads (not first reads)
# The precision a launch command asks for (SET002) and flash-attn 2 on pre-Ampere GPUs (GPU032). Recorded fixtures
# rtx4090-4x-no-p2p / dgx-a100-8x-nvswitch with the GPUs' model and capability edited, as the corpus cases do.

def _gpus(name, cc, launch=None, flash=None, keep=2):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = name, list(cc)
        if launch:
            s["launch"] = _launch(launch)
        if flash:
            s["packages"]["versions"]["flash-attn"] = flash
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, edit=edit)


def test_set002_launch_command_asks_for_bf16_on_pre_ampere():
    """lm-sys/FastChat#399's class: torchrun ... train_mem.py --bf16 True on V100s (7.0): transformers refuses bf16."""
    cmd = ["torchrun", "--nproc_per_node=2", "train_mem.py", "--model", "/m", "--bf16", "True", "--hf_token", "x"]
    found = [f for f in findings_of(_gpus("Tesla V100-SXM2-32GB", (7, 0), cmd), "SET002") if "launch command" in f.title]
    assert found and found[0].severity == "error" and "--bf16 True" in found[0].title
    accel = ["accelerate", "launch", "--mixed_precision", "bf16", "train.py"]
    assert [f for f in findings_of(_gpus("Tesla T4", (7, 5), accel), "SET002") if "launch command" in f.title]


def test_set002_launch_precision_quiet_on_ampere_and_for_fp16():
    cmd = ["torchrun", "--nproc_per_node=2", "train_mem.py", "--bf16", "True"]
    assert not [f for f in findings_of(_gpus("NVIDIA A100-SXM4-80GB", (8, 0), cmd), "SET002") if "launch" in f.title]
    fp16 = ["deepspeed", "train.py", "--fp16"]
    assert not [f for f in findings_of(_gpus("Tesla V100-SXM2-32GB", (7, 0), fp16), "SET002") if "launch" in f.title]
    off = ["torchrun", "train.py", "--bf16", "False"]
    assert not [f for f in findings_of(_gpus("Tesla V100-SXM2-32GB", (7, 0), off), "SET002") if "launch" in f.title]


def test_script_options_keep_precision_only():
    cmd = parse_command(["deepspeed", "finetune.py", "--deepspeed", "ds.json", "--bf16", "--api_key", "secret"])
    assert cmd["script_options"] == {"bf16": "1"} and "secret" not in str(cmd)
    assert "script_options" not in parse_command(["torchrun", "train.py", "--lr", "3e-4"])


def test_gpu032_flash_attn_2_on_pre_ampere_trigger_and_quiet():
    """InternRobotics/PointLLM#47's class: flash-attn 2 installed on V100s; quiet on Ampere, or with flash-attn 1.x."""
    found = [f for f in findings_of(_gpus("Tesla V100-SXM2-32GB", (7, 0), flash="2.5.7"), "GPU032") if "flash-attn" in f.title]
    assert found and found[0].severity == "warning"
    assert not [f for f in findings_of(_gpus("NVIDIA A100-SXM4-80GB", (8, 0), flash="2.5.7"), "GPU032") if "flash" in f.title]
    assert not [f for f in findings_of(_gpus("Tesla T4", (7, 5), flash="1.0.9"), "GPU032") if "flash" in f.title]
    # one Ampere GPU among older ones: the job may run there; no verdict
    def mixed(s):
        s["gpus"]["devices"][0]["cuda_capability"] = [7, 0]
        s["packages"]["versions"]["flash-attn"] = "2.5.7"
    assert not [f for f in findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=2, edit=mixed), "GPU032") if "flash" in f.title]
