"""Round 16 wave 2 (issue 26): what the training script asks of the machine, as facts, judged against the machine.

lint.scriptfacts reads, from `check --script` or the script of check's own launch command (the launch section's
program_path), the precision the script asks for (TrainingArguments bf16/tf32, Accelerator mixed_precision, Lightning
precision=, autocast dtype, float8), its attention kernel (attn_implementation, flash_attn imports), torch.compile
and the init_process_group backend. SET002, GPU032 and PKG005 judge them against the GPU and package facts. Pure
functions on recorded snapshots (fixtures/snapshots) and a fake /proc tree: no process is started."""
import ast

from factory import findings_of, fixture_snapshot, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.launch import launch_commands
from ddpdoctor.lint.scriptfacts import requests_of
from ddpdoctor.pipeline.check import add_launch_script_facts

SCRIPT = '''
import torch
import torch.distributed as dist
from transformers import TrainingArguments
args = TrainingArguments(output_dir="out", bf16=True)
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")
model = torch.compile(model)
dist.init_process_group("nccl")
'''


def _asks(src):
    return requests_of(ast.parse(src), "train.py")


def test_requests_of_reads_the_literals_a_script_asks_with():
    got = _asks(SCRIPT + 'acc = Accelerator(mixed_precision="fp8")\ntr = Trainer(precision="bf16-mixed")\n'
                'with torch.autocast("cuda", dtype=torch.bfloat16): pass\nimport flash_attn\n'
                'a = TrainingArguments(tf32=True)\n')
    assert {(p["precision"], p["what"]) for p in got["precision"]} == {
        ("bf16", "TrainingArguments(bf16=True)"), ("fp8", "Accelerator(mixed_precision='fp8')"),
        ("bf16", "Trainer(precision='bf16-mixed')"), ("bf16", "autocast(dtype=torch.bfloat16)"),
        ("tf32", "TrainingArguments(tf32=True)")}
    assert [a["kernel"] for a in got["attention"]] == ["flash_attention_2", "flash_attention_2"]
    assert got["backends"] == [{"backend": "nccl", "path": "train.py", "line": 8, "what": "init_process_group('nccl')"}]


def test_requests_of_quiet_on_what_asks_nothing():
    got = _asks('args = TrainingArguments(bf16=False, fp16=True)\nTrainer(precision="16-mixed")\n'
                'm = from_pretrained("m", attn_implementation="eager")\ndist.init_process_group(backend=args.backend)\n')
    assert got["precision"] == [{"precision": "fp16", "path": "train.py", "line": 1, "what": "TrainingArguments(fp16=True)"}]
    assert got["attention"] == [] and got["backends"] == []


def _machine(name, cc, asks=None, compiles=(), versions=None, os_name=None):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = name, list(cc)
        s["packages"]["versions"].update(versions or {})
        if os_name:
            s["host"]["os"] = os_name
        facts = dict(asks or {}, compiles=[{"path": "train.py", "line": 7}] if compiles else [])
        s["lint"] = {"unavailable": "no script", "facts": facts}
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=2, edit=edit)


BF16 = {"precision": [{"precision": "bf16", "path": "train.py", "line": 5, "what": "TrainingArguments(bf16=True)"}]}
FA2 = {"attention": [{"kernel": "flash_attention_2", "path": "train.py", "line": 6,
                      "what": "from_pretrained(attn_implementation='flash_attention_2')"}]}


def test_set002_script_bf16_on_pre_ampere_trigger_and_quiet():
    found = [f for f in findings_of(_machine("Tesla T4", (7, 5), BF16), "SET002") if "training script" in f.title]
    assert found and found[0].severity == "error" and "bf16" in found[0].title and "script:train.py" in found[0].subjects
    assert not [f for f in findings_of(_machine("NVIDIA A100-SXM4-80GB", (8, 0), BF16), "SET002") if "script" in f.title]
    autocast = {"precision": [dict(BF16["precision"][0], what="autocast(dtype=torch.bfloat16)")]}
    soft = [f for f in findings_of(_machine("Tesla T4", (7, 5), autocast), "SET002") if "training script" in f.title]
    assert soft and soft[0].severity == "warning"


def test_gpu032_script_flash_attention_trigger_and_quiet():
    on_v100 = [f for f in findings_of(_machine("Tesla V100-SXM2-32GB", (7, 0), FA2, versions={"flash-attn": "2.5.7"}),
                                      "GPU032") if "FlashAttention" in f.title]
    assert on_v100 and on_v100[0].severity == "error"
    missing = [f for f in findings_of(_machine("NVIDIA A100-SXM4-80GB", (8, 0), FA2, versions={"flash-attn": None}),
                                      "GPU032") if "not installed" in f.title]
    assert missing and missing[0].severity == "error"
    assert not [f for f in findings_of(_machine("NVIDIA A100-SXM4-80GB", (8, 0), FA2, versions={"flash-attn": "2.5.7"}),
                                       "GPU032") if "flash" in f.title.lower()]


def test_gpu032_torch_compile_triton_trigger_and_quiet():
    old = [f for f in findings_of(_machine("Tesla P100-PCIE-16GB", (6, 0), compiles=True), "GPU032") if "compile" in f.title]
    assert old and old[0].severity == "error" and "sm_60" in old[0].title
    absent = {"triton": None, "pytorch-triton": None, "pytorch-triton-rocm": None}
    none = [f for f in findings_of(_machine("Tesla V100-SXM2-32GB", (7, 0), compiles=True, versions=absent),
                                   "GPU032") if "triton" in f.title]
    assert none and none[0].severity == "error"
    # pytorch/pytorch#95082's class: the triton module comes from torch's pytorch-triton distribution - not missing
    nightly = dict(absent, **{"pytorch-triton": "2.0.0+c8bfe3f548"})
    assert not [f for f in findings_of(_machine("NVIDIA GeForce RTX 4090", (8, 9), compiles=True, versions=nightly),
                                       "GPU032") if "compile" in f.title]
    # only `triton` recorded (a snapshot from before pytorch-triton was gathered): not known to be missing
    assert not [f for f in findings_of(_machine("NVIDIA GeForce RTX 4090", (8, 9), compiles=True,
                                                versions={"triton": None}), "GPU032") if "compile" in f.title]
    win = [f for f in findings_of(_machine("NVIDIA GeForce RTX 3090", (8, 6), compiles=True, os_name="Windows"),
                                  "GPU032") if "triton" in f.title]
    assert win and win[0].severity == "warning" and "guess" in win[0].title
    assert not [f for f in findings_of(_machine("Tesla V100-SXM2-32GB", (7, 0), compiles=True,
                                                versions={"triton": "3.1.0"}), "GPU032") if "compile" in f.title]
    assert not [f for f in findings_of(_machine("Tesla P100-PCIE-16GB", (6, 0)), "GPU032") if "compile" in f.title]


def test_pkg005_script_asks_for_nccl_on_windows_trigger_and_quiet():
    nccl = {"backends": [{"backend": "nccl", "path": "train.py", "line": 8, "what": "init_process_group('nccl')"}]}
    snap = make_snapshot(host={"os": "Windows"}, packages={"torch": "2.1.0"},
                         gpus={"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "cuda_capability": [8, 6]}]},
                         lint={"unavailable": "no script", "facts": nccl})
    found = findings_of(snap, "PKG005")
    assert found and found[0].severity == "error" and "NCCL backend" in found[0].title
    gloo = {"backends": [dict(nccl["backends"][0], backend="gloo")]}
    snap = make_snapshot(host={"os": "Windows"}, packages={"torch": "2.1.0"},
                         gpus={"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "cuda_capability": [8, 6]}]},
                         lint={"unavailable": "no script", "facts": gloo})
    assert all(f.severity == "warning" for f in findings_of(snap, "PKG005"))


def test_launch_commands_script_is_read_for_its_asks(tmp_path):
    def proc(pid, ppid, argv, cwd=None):
        d = tmp_path / "proc" / pid
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} (x) S {ppid} 1 1 0")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        if cwd:
            (d / "cwd").symlink_to(cwd)

    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(SCRIPT)
    proc("self", "300", ["python", "-m", "ddpdoctor", "check"])
    proc("300", "1", ["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"], cwd="/job")
    got = launch_commands(Sources(environ={}, root=str(tmp_path)))
    assert got["commands"][0]["program_path"] == "/job/train.py"
    snap = make_snapshot(launch={"commands": [dict(got["commands"][0], program_path=str(tmp_path / "job" / "train.py"))],
                                 "depth_read": 1})
    snap.sections["lint"] = {"unavailable": "no script"}
    add_launch_script_facts(snap)
    facts = snap.sections["lint"]["facts"]
    assert facts["precision"][0]["precision"] == "bf16" and facts["compiles"] and facts["backends"][0]["backend"] == "nccl"
    quiet = make_snapshot(launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "x.py", "depth": 1}],
                                  "depth_read": 1})
    quiet.sections["lint"] = {"unavailable": "no script"}
    add_launch_script_facts(quiet)
    assert "facts" not in quiet.sections["lint"]


def test_gpu032_flash_attn_1_needs_turing_trigger_and_quiet():
    """lm-sys/FastChat#498's class: flash-attn 1.x on V100 (sm_70) fails 'Expected is_sm90 || is_sm8x || is_sm75';
    quiet on a T4 (sm_75), which flash-attn 1.x supports."""
    v100 = [f for f in findings_of(_machine("Tesla V100-SXM2-32GB", (7, 0), versions={"flash-attn": "1.0.3"}), "GPU032")
            if "flash-attn" in f.title]
    assert v100 and v100[0].severity == "warning" and "1.0.3" in v100[0].title
    assert not [f for f in findings_of(_machine("Tesla T4", (7, 5), versions={"flash-attn": "1.0.3"}), "GPU032")
                if "flash" in f.title]


def test_gpu032_torch_compile_without_a_libcuda_link_trigger_and_quiet(tmp_path):
    """pytorch/pytorch#103417's class: triton installed, torch.compile in the script, and only libcuda.so.1 beside the
    driver library: Triton's `gcc ... -lcuda` fails. The fact: gather.cuda.unversioned_link on a fake root."""
    from ddpdoctor.gather.cuda import unversioned_link

    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.1").write_text("")
    src = Sources(environ={}, root=str(tmp_path))
    assert unversioned_link(src, "/usr/lib/x86_64-linux-gnu/libcuda.so.1") is False
    (lib / "libcuda.so").write_text("")
    assert unversioned_link(src, "/usr/lib/x86_64-linux-gnu/libcuda.so.1") is True

    def machine(link, env=None):
        snap = _machine("NVIDIA GeForce RTX 3090", (8, 6), compiles=True, versions={"triton": "2.0.0"})
        snap.sections["cuda"] = {"init_result": 0, "library": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                 "unversioned_link": link}
        snap.sections["env"]["vars"].update(env or {})
        return [f for f in findings_of(snap, "GPU032") if "libcuda.so" in f.title]
    found = machine(False)
    assert found and found[0].severity == "warning"
    assert not machine(True) and not machine(False, {"TRITON_LIBCUDA_PATH": "/usr/local/cuda/lib64/stubs"})


def test_config_facts_read_precision_and_attention_trigger_and_quiet(tmp_path):
    """georgian-io/LLM-Finetuning-Toolkit#134 / axolotl#1359's class: `bf16: true`, `tf32: true`, `flash_attention:
    true` in the job's YAML (`check --config`), judged like a script's literals on a T4."""
    from ddpdoctor.lint.configfacts import config_facts

    cfg = tmp_path / "config.yml"
    cfg.write_text("training:\n  bf16: true\n  tf32: true\n  fp16: false\nflash_attention: true\n")
    facts = config_facts([str(cfg)])
    assert {p["precision"] for p in facts["precision"]} == {"bf16", "tf32"}
    assert [a["kernel"] for a in facts["attention"]] == ["flash_attention_2"]
    ds = tmp_path / "ds.json"
    ds.write_text('{"bf16": {"enabled": false}, "fp16": {"enabled": true}}')
    assert [p["precision"] for p in config_facts([str(ds)])["precision"]] == ["fp16"]
    on_t4 = _machine("Tesla T4", (7, 5), {"precision": facts["precision"]})
    assert [f for f in findings_of(on_t4, "SET002") if "job's config asks for tf32" in f.title]
    on_a100 = _machine("NVIDIA A100-SXM4-80GB", (8, 0), {"precision": facts["precision"]})
    assert not [f for f in findings_of(on_a100, "SET002") if "asks for" in f.title]
