"""Round 15 (check15): Lightning's Trainer(devices=N) / Trainer(gpus=...) literals read by `check --script` and judged by
GPU019 against the GPUs the process will see (the LEFT item of stop 40: 'GPU016/GPU019 for devices= literals').
Pure functions on recorded facts: no process is started."""
from __future__ import annotations

import ast

from factory import findings_of, fixture_snapshot

from ddpdoctor.lint.scriptfacts import script_facts, trainer_gpu_indices

TRAINER = "import lightning as L\ntrainer = L.Trainer({args})\n"


def _facts(tmp_path, text):
    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


def _gpu019(tmp_path, args, cvd=None):
    facts = _facts(tmp_path, TRAINER.format(args=args))
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}

    def edit(sections):
        sections["lint"] = lint
        if cvd is not None:
            sections.setdefault("env", {"vars": {}, "redacted": []})["vars"]["CUDA_VISIBLE_DEVICES"] = cvd

    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=edit)  # a recorded 4-GPU machine
    return [(f.severity, f.title) for f in findings_of(snap, "GPU019") if "Trainer(" in f.title]


def test_trainer_device_literals_become_gpu_ordinals():
    src = ("t = Trainer(devices=4, accelerator='gpu')\nt = Trainer(gpus=[0, 3])\nt = Trainer(devices='0,2')\n"
           "t = Trainer(devices='2')\nt = Trainer(devices=-1)\nt = Trainer(devices='auto')\n"
           "t = Trainer(devices=8, accelerator='cpu')\nt = Trainer(devices=n)\n")
    got = [(e["index"], e["line"], e["what"]) for e in trainer_gpu_indices(ast.parse(src), "train.py")]
    assert got == [(3, 1, "Trainer(devices=4)"), (0, 2, "Trainer(gpus=[0, 3])"), (3, 2, "Trainer(gpus=[0, 3])"),
                   (0, 3, "Trainer(devices='0,2')"), (2, 3, "Trainer(devices='0,2')"), (1, 4, "Trainer(devices='2')")]


def test_trainer_devices_beyond_the_visible_gpus_warns(tmp_path):
    # 8 GPUs asked on the recorded 4-GPU machine; 4 asked where CUDA_VISIBLE_DEVICES leaves 2
    got = _gpu019(tmp_path, "accelerator='gpu', devices=8, strategy='ddp'")
    assert [s for s, _ in got] == ["warning"] and "Trainer(devices=8)" in got[0][1] and "GPU 7" in got[0][1]
    got = _gpu019(tmp_path, "devices=4", cvd="0,1")
    assert [s for s, _ in got] == ["warning"] and "2 GPU(s)" in got[0][1]
    assert [s for s, _ in _gpu019(tmp_path, "gpus=[0, 3]", cvd="0,1")] == ["warning"]


def test_trainer_devices_that_fit_are_quiet(tmp_path):
    assert _gpu019(tmp_path, "devices=4") == []
    assert _gpu019(tmp_path, "devices=2", cvd="0,1") == []
    assert _gpu019(tmp_path, "devices=-1") == []
    assert _gpu019(tmp_path, "devices='auto'") == []
    assert _gpu019(tmp_path, "accelerator='cpu', devices=8") == []  # CPU processes, not GPU ordinals


# ------------------------------- ENV019: no local-rank argument, strict parse_args, the old launcher's environment
# CoinCheung/BiSeNet#259 (batch 72): torch.distributed.launch passes --local_rank=N; train_amp.py took none and argparse exited.
LEGACY = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "1"}
TORCHRUN = dict(LEGACY, LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", GROUP_RANK="0", TORCHELASTIC_RUN_ID="none")
STRICT = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--config')\nargs = p.parse_args()\n"


def _env19(tmp_path, text, env=LEGACY, torch="1.11.0"):
    from factory import make_snapshot

    facts = _facts(tmp_path, text)
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}
    snap = make_snapshot(env=env, packages={"torch": torch}, lint=lint)
    return [(f.severity, f.title) for f in findings_of(snap, "ENV019")]


def test_strict_parse_args_fact(tmp_path):
    assert [p["line"] for p in _facts(tmp_path, STRICT)["strict_parse_args"]] == [4]
    assert _facts(tmp_path, STRICT.replace("p.parse_args()", "p.parse_args(['--config', 'x'])"))["strict_parse_args"] == []


def test_no_local_rank_argument_under_the_old_launcher_warns(tmp_path):
    got = _env19(tmp_path, STRICT)
    assert [s for s, _ in got] == ["warning"] and "train.py:4" in got[0][1] and "--local_rank" in got[0][1]


def test_no_local_rank_argument_quiet(tmp_path):
    assert _env19(tmp_path, STRICT, env=TORCHRUN) == []  # torchrun passes no argument
    assert _env19(tmp_path, STRICT, torch="2.1.0") == []  # 2.x's launch runs under the elastic agent
    assert _env19(tmp_path, STRICT.replace("p.parse_args()", "p.parse_known_args()[0]")) == []
    assert _env19(tmp_path, "import os\nrank = int(os.environ['RANK'])\n") == []  # no argparse at all
    with_arg = STRICT.replace("p.add_argument('--config')", "p.add_argument('--local_rank', type=int)")
    assert _env19(tmp_path, with_arg) == []  # takes the argument torch 1.11 passes


def test_no_local_rank_argument_quiet_on_a_recorded_torchrun_worker(tmp_path):
    facts = _facts(tmp_path, STRICT)
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}

    def edit(sections):
        sections["lint"] = lint
        sections["packages"]["versions"]["torch"] = "1.11.0"

    snap = fixture_snapshot("dgx-a100-torchrun-worker-no-launcher", edit=edit)  # LOCAL_RANK set by the elastic agent
    assert [f for f in findings_of(snap, "ENV019") if "strictly" in f.title] == []
