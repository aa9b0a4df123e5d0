"""Round 17 (issue 26): the requests round 16 could not see, read from the script as facts.

- precision through a name bound once (`bf16 = True; TrainingArguments(bf16=bf16)`), an argparse option's literal
  default (`args.bf16`), a conditional dtype whose test does not ask the GPU (`torch.bfloat16 if args.x else ...`;
  one that asks `torch.cuda.is_bf16_supported()` asks for nothing);
- the model loaded or cast in bfloat16 (`from_pretrained(torch_dtype=torch.bfloat16)`, `.to(torch.bfloat16)`,
  `.bfloat16()`): SET002 warns (not an error: no library refuses it up front);
- `bf16=True` / `mixed_precision=` / `precision=` read only off the calls that take them (data/precision_calls.json);
- a launcher's `-m module` program resolved to its file (the launcher's cwd, then the import path).
Pure functions on parsed text, recorded snapshots and a fake /proc tree: no process is started."""
import ast
import sys

from factory import findings_of, fixture_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.launch import launch_commands
from ddpdoctor.lint.scriptfacts import requests_of


def _precision(src):
    return [(p["precision"], p["what"]) for p in requests_of(ast.parse(src), "train.py")["precision"]]


def test_precision_through_names_and_argparse_defaults_trigger_and_quiet():
    got = _precision('import argparse\np = argparse.ArgumentParser()\np.add_argument("--bf16", default=True)\n'
                     'args = p.parse_args()\nuse = True\nTrainingArguments(output_dir="o", bf16=use)\n'
                     'MyTrainingArguments(bf16=args.bf16)\n')
    assert got == [("bf16", "TrainingArguments(bf16=True) (through use)"),
                   ("bf16", "MyTrainingArguments(bf16=True) (through args.bf16)")]
    # a name bound twice (which binding runs is not guessed), a False default, a computed value: nothing
    assert _precision('use = True\nuse = False\nTrainingArguments(bf16=use)\np.add_argument("--bf16", default=False)\n'
                      'TrainingArguments(bf16=args.bf16)\nTrainingArguments(bf16=torch.cuda.is_bf16_supported())\n') == []


def test_keyword_read_only_off_the_calls_that_take_it():
    assert _precision('SFTConfig(bf16=True)\nAccelerator(mixed_precision="bf16")\nFabric(precision="bf16-mixed")\n') == [
        ("bf16", "SFTConfig(bf16=True)"), ("bf16", "Accelerator(mixed_precision='bf16')"),
        ("bf16", "Fabric(precision='bf16-mixed')")]
    assert _precision('make_plot(bf16=True)\nlogger.log(mixed_precision="bf16")\nsummary(precision="bf16")\n') == []


def test_model_load_dtype_and_conditional_dtype_trigger_and_quiet():
    got = _precision('import torch\ndtype = torch.bfloat16 if args.half else torch.float32\n'
                     'm = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)\n'
                     'n = AutoModel.from_pretrained("m", dtype=dtype)\nm.to(torch.bfloat16)\nn.bfloat16()\n'
                     'with torch.autocast("cuda", dtype=dtype): pass\n')
    assert got == [("bf16", "from_pretrained(torch_dtype=torch.bfloat16)"),
                   ("bf16", "from_pretrained(dtype=torch.bfloat16) (through dtype) (when args.half)"),
                   ("bf16", "to(torch.bfloat16)"), ("bf16", "n.bfloat16()"),
                   ("bf16", "autocast(dtype=torch.bfloat16) (through dtype) (when args.half)")]
    # the script asks the GPU itself, or asks for fp16 / fp32: nothing
    assert _precision('dt = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16\n'
                      'm = AutoModel.from_pretrained("m", torch_dtype=dt)\nm.to(torch.float16)\n'
                      'AutoModel.from_pretrained("m", torch_dtype=torch.float16)\nx.to("cuda")\n') == []


def _machine(name, cc, asks):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = name, list(cc)
        s["lint"] = {"unavailable": "no script", "facts": dict(asks, compiles=[])}
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=2, edit=edit)


LOAD = {"precision": [{"precision": "bf16", "load": True, "path": "train.py", "line": 3,
                       "what": "from_pretrained(torch_dtype=torch.bfloat16)"}]}


def test_set002_model_loaded_in_bf16_on_pre_ampere_warns_trigger_and_quiet():
    found = [f for f in findings_of(_machine("Tesla V100-SXM2-32GB", (7, 0), LOAD), "SET002") if "script" in f.title]
    assert found and found[0].severity == "warning" and "torch_dtype=torch.bfloat16" in found[0].title
    assert not [f for f in findings_of(_machine("NVIDIA A100-SXM4-80GB", (8, 0), LOAD), "SET002") if "script" in f.title]


def _proc(root, pid, ppid, argv, cwd=None):
    d = root / "proc" / pid
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} (x) S {ppid} 1 1 0")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    if cwd:
        (d / "cwd").symlink_to(cwd)


def test_module_program_resolved_through_cwd_and_import_path_trigger_and_quiet(tmp_path, monkeypatch):
    (tmp_path / "job" / "pkg").mkdir(parents=True)
    (tmp_path / "job" / "pkg" / "train.py").write_text("x = 1\n")
    (tmp_path / "site" / "axolotl" / "cli" / "train").mkdir(parents=True)
    (tmp_path / "site" / "axolotl" / "cli" / "train" / "__main__.py").write_text("x = 1\n")
    monkeypatch.setattr(sys, "path", ["/site"] + sys.path)
    _proc(tmp_path, "self", "300", ["python", "-m", "ddpdoctor", "check"])
    _proc(tmp_path, "300", "301", ["torchrun", "--nproc-per-node", "2", "-m", "pkg.train"], cwd="/job")
    _proc(tmp_path, "301", "1", ["accelerate", "launch", "-m", "axolotl.cli.train", "cfg.yml"], cwd="/elsewhere")
    got = launch_commands(Sources(environ={}, root=str(tmp_path)))["commands"]
    assert [c.get("program_path") for c in got] == ["/job/pkg/train.py", "/site/axolotl/cli/train/__main__.py"]
    # without -m, a dotted word is not a module; a module nowhere on the path is not guessed
    quiet = tmp_path / "q"
    (quiet / "job" / "pkg").mkdir(parents=True)
    (quiet / "job" / "pkg" / "train.py").write_text("x = 1\n")  # there, but the launcher was not told -m
    _proc(quiet, "self", "300", ["python", "-m", "ddpdoctor", "check"])
    _proc(quiet, "300", "301", ["torchrun", "--no-python", "pkg.train"], cwd="/job")
    _proc(quiet, "301", "1", ["torchrun", "-m", "nowhere.train"], cwd="/job")
    assert [c.get("program_path") for c in launch_commands(Sources(environ={}, root=str(quiet)))["commands"]] == [None, None]


def _toolkit_machine(version, torch_cuda="12.1", deepspeed="0.12.0", cc=(8, 9), asks=None):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["cuda_capability"] = list(cc)
        s["packages"]["versions"].update({"deepspeed": deepspeed, "torch": "2.1.2"})
        s["packages"]["torch_build"] = {"cuda": torch_cuda, "hip": None}
        s["packages"]["cuda_toolkit"] = {"home": "/usr/local/cuda-11.7", "from": "CUDA_HOME", "version": version}
        if asks is not None:
            s["lint"] = {"unavailable": "no script", "facts": asks}
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=2, edit=edit)


def test_pkg014_toolkit_major_against_torch_trigger_and_quiet():
    """deepspeedai/DeepSpeed's 'Installed CUDA version 11.7 does not match the version torch was compiled with 12.1'
    class: DeepSpeed without pre-built ops compiles them with CUDA_HOME's toolkit."""
    found = findings_of(_toolkit_machine("11.7.1"), "PKG014")
    assert found and found[0].severity == "warning" and "torch is built for CUDA 12.1" in found[0].title
    # same major: cpp_extension only warns, and DeepSpeed 0.14.3+ lists 12.1 and 12.4 as compatible minors
    assert not findings_of(_toolkit_machine("12.4.0", deepspeed="0.14.3"), "PKG014")
    # ... which DeepSpeed 0.12.0 did not (its cuda_minor_mismatch_ok for 12: 12.0, 12.1; check26)
    [ds] = findings_of(_toolkit_machine("12.4.0"), "PKG014")
    assert ds.title.startswith("DeepSpeed 0.12.0 refuses") and ds.evidence["rule_from"] == "0.9.3"
    # nothing compiles at run time: said as info only
    assert [f.severity for f in findings_of(_toolkit_machine("11.7.1", deepspeed=None), "PKG014")] == ["info"]
    script = {"extension_builds": [{"path": "train.py", "line": 4, "what": "torch.utils.cpp_extension.load(...)"}]}
    assert [f.severity for f in findings_of(_toolkit_machine("11.7.1", deepspeed=None, asks=script), "PKG014")] == ["warning"]


def test_pkg014_toolkit_older_than_the_gpu_trigger_and_quiet():
    """deepspeedai/DeepSpeedExamples#634's class: fused_adam built for an sm_89 GPU with CUDA 11.7's nvcc."""
    found = findings_of(_toolkit_machine("11.7.1", torch_cuda="11.7"), "PKG014")
    assert found and "sm_89" in found[0].title and "sm_86" in found[0].title
    assert not findings_of(_toolkit_machine("11.8.0", torch_cuda="11.8"), "PKG014")
    assert not findings_of(_toolkit_machine("11.7.1", torch_cuda="11.7", cc=(8, 6)), "PKG014")


def test_cuda_toolkit_gathered_as_cpp_extension_finds_it(tmp_path):
    from ddpdoctor.gather.packages import cuda_toolkit

    (tmp_path / "opt" / "cuda-11.7").mkdir(parents=True)
    (tmp_path / "opt" / "cuda-11.7" / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "11.7.1"}}')
    assert cuda_toolkit(Sources(environ={"CUDA_HOME": "/opt/cuda-11.7"}, root=str(tmp_path))) == {
        "home": "/opt/cuda-11.7", "from": "CUDA_HOME", "version": "11.7.1", "nvcc": False}  # round 23: bin/nvcc here?
    (tmp_path / "old" / "bin").mkdir(parents=True)
    (tmp_path / "old" / "bin" / "nvcc").write_text("")
    (tmp_path / "old" / "version.txt").write_text("CUDA Version 10.2.89\n")
    assert cuda_toolkit(Sources(environ={"PATH": "/usr/bin:/old/bin"}, root=str(tmp_path))) == {
        "home": "/old", "from": "nvcc on PATH", "version": "10.2.89", "nvcc": True}
    assert cuda_toolkit(Sources(environ={"PATH": "/usr/bin"}, root=str(tmp_path))) == {}


def test_extension_builds_read_from_the_script_trigger_and_quiet():
    got = requests_of(ast.parse("from torch.utils.cpp_extension import load\nimport torch.utils.cpp_extension\n"
                                "ext = load(name='x', sources=['x.cu'])\n"
                                "y = torch.utils.cpp_extension.load_inline('y', '')\n"), "train.py")["extension_builds"]
    assert [r["line"] for r in got] == [3, 4]
    assert requests_of(ast.parse("import json\nload(f)\njson.load(f)\n"), "t.py")["extension_builds"] == []


def test_triton_library_import_read_and_judged_by_gpu032_trigger_and_quiet():
    """unslothai/unsloth#2816's class: a library whose own kernels are Triton's, where Triton cannot run."""
    got = requests_of(ast.parse("from unsloth import FastLanguageModel\nimport liger_kernel.transformers\n"
                                "from flash_attn.ops.triton import layer_norm\n"), "train.py")["triton_libraries"]
    assert [(r["line"], r["library"]) for r in got] == [(1, "Unsloth"), (2, "Liger Kernel"), (3, "flash-attn's Triton ops")]
    assert requests_of(ast.parse("import unslothx\nfrom flash_attn import flash_attn_func\n"), "t.py")["triton_libraries"] == []
    lib = {"triton_libraries": [dict(got[0], what="import unsloth")]}
    p100 = [f for f in findings_of(_machine("Tesla P100-PCIE-16GB", (6, 0), lib), "GPU032") if "Triton" in f.title]
    assert p100 and p100[0].severity == "error" and "Unsloth" in p100[0].title
    assert not [f for f in findings_of(_machine("Tesla T4", (7, 5), lib), "GPU032") if "Unsloth" in f.title]


def test_one_launcher_table_read_by_lint_and_by_the_launch_facts_trigger_and_quiet():
    """lint.launchinfo (README / shell lines) and facts.launch (/proc argv) name launchers from data/launchers.json:
    the `python -m` spellings of accelerate and deepspeed are launchers to both now."""
    from ddpdoctor.facts.launch import which_launcher
    from ddpdoctor.lint.launchinfo import parse_launches

    text = ("python -m accelerate.commands.launch c.py\npython -m deepspeed.launcher.runner d.py\n"
            "python -m torch.distributed.launch --use_env e.py\naccelerate-launch f.py\n")
    assert [(x.launcher, x.script) for x in parse_launches(text, "run.sh")] == [
        ("accelerate", "c.py"), ("deepspeed", "d.py"), ("torch.distributed.launch", "e.py"), ("accelerate", "f.py")]
    assert [which_launcher(a)[0] for a in (["python", "-m", "accelerate.commands.launch", "c.py"],
                                           ["python3", "-m", "deepspeed.launcher.runner", "d.py"],
                                           ["python", "-m", "torch.distributed.launch", "e.py"],
                                           ["accelerate-launch", "f.py"])] == ["accelerate", "deepspeed", "torchrun", "accelerate"]
    # not launchers: another accelerate subcommand, a user's module, a plain python line
    assert [which_launcher(a)[0] for a in (["accelerate", "config"], ["python", "-m", "mypkg.train"])] == [None, None]
    assert [(x.launcher, x.script) for x in parse_launches("python -m mypkg.train\npython g.py\n", "run.sh")] == [
        ("python", "mypkg.train"), ("python", "g.py")]


def _xformers_machine(torch, built, xformers="0.0.26.post1", python="3.10.14", built_python="3.10.14"):
    def edit(s):
        s["packages"]["versions"].update({"torch": torch, "xformers": xformers})
        s["packages"]["python"] = python
        s["packages"]["xformers_build"] = {"torch": built, "cuda": "1201", "hip": None, "python": built_python}
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)


def test_pkg012_xformers_built_for_another_torch_trigger_and_quiet():
    """yangjianxin1/Firefly#258 / yufu-wang/PromptHMR#4 / victorchall/EveryDream2trainer#122's class: xformers' recorded
    build (xformers/cpp_lib.json) against the installed torch: another release, or another +cuXXX build."""
    other = [f for f in findings_of(_xformers_machine("2.1.0+cu121", "2.3.0+cu121"), "PKG012") if "xformers" in f.title]
    assert other and other[0].severity == "warning" and "2.3.0+cu121" in other[0].title and "pkg:xformers" in other[0].subjects
    assert [f for f in findings_of(_xformers_machine("2.6.0+cu126", "2.6.0+cu124", "0.0.29.post2"), "PKG012")
            if "xformers" in f.title]
    assert [f for f in findings_of(_xformers_machine("2.3.0+cu121", "2.3.0+cu121", python="3.11.2"), "PKG012")
            if "Python 3.10.14" in f.title]
    # the same build; 0.0.34+ (torch's stable ABI) under a later torch: quiet
    assert not [f for f in findings_of(_xformers_machine("2.3.0+cu121", "2.3.0+cu121"), "PKG012") if "xformers" in f.title]
    assert not [f for f in findings_of(_xformers_machine("2.11.0+cu128", "2.10.0+cu128", "0.0.34"), "PKG012")
                if "xformers" in f.title]
    assert [f for f in findings_of(_xformers_machine("2.9.0+cu128", "2.10.0+cu128", "0.0.34"), "PKG012")
            if "xformers" in f.title]


def test_xformers_build_gathered_from_cpp_lib_json(tmp_path, monkeypatch):
    from importlib import metadata

    from ddpdoctor.gather.packages import xformers_build

    (tmp_path / "xformers").mkdir()
    (tmp_path / "xformers" / "cpp_lib.json").write_text(
        '{"version": {"cuda": 1201, "hip": null, "torch": "2.3.0+cu121", "python": "3.10.14"}, "env": {}}')

    class Dist:
        def locate_file(self, rel):
            return tmp_path / rel

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert xformers_build() == {"torch": "2.3.0+cu121", "cuda": "1201", "hip": None, "python": "3.10.14"}
    (tmp_path / "xformers" / "cpp_lib.json").unlink()
    assert xformers_build() == {}


CUDA_USE = {"cuda_uses": [{"path": "train.py", "line": 12, "what": "model.cuda()"}]}


def test_script_cuda_use_makes_gpu001_and_gpu023_louder_trigger_and_quiet():
    """pytorch/pytorch#28111 / zhysora/UCGAN#2's class: the script puts work on CUDA ("Torch not compiled with CUDA
    enabled"); check knows it from the script's `cuda_uses` fact."""
    def cpu_only(asks):
        def edit(s):
            s["lint"] = {"unavailable": "no script", "facts": asks}
        return fixture_snapshot("cpu-only", edit=edit)

    loud = findings_of(cpu_only(CUDA_USE), "GPU001")
    assert loud and loud[0].severity == "warning" and "train.py:12 model.cuda()" in loud[0].title
    assert [f.severity for f in findings_of(cpu_only({"cuda_uses": []}), "GPU001")] == ["info"]

    def cpu_torch(asks):
        def edit(s):
            s["packages"]["versions"]["torch"] = "1.12.0+cpu"
            s["packages"]["torch_build"] = {"cuda": None, "hip": None}
            s["lint"] = {"unavailable": "no script", "facts": asks}
        return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)

    assert [f.severity for f in findings_of(cpu_torch(CUDA_USE), "GPU023")] == ["error"]
    assert [f.severity for f in findings_of(cpu_torch({}), "GPU023")] == ["warning"]
    got = requests_of(ast.parse("x = torch.zeros(1).cuda()\ndev = torch.device('cuda:0')\nok = torch.cuda.is_available()\n"),
                      "train.py")["cuda_uses"]
    assert [(r["line"], r["what"]) for r in got] == [(1, "torch.zeros(1).cuda()"), (2, "'cuda:0'")]
    assert requests_of(ast.parse("torch.cuda.is_available()\ndevice = 'cpu'\n"), "t.py")["cuda_uses"] == []
