"""Each lint rule: registered like a check, documented, one snippet that triggers it and one that does not.

The functional fixtures (test_lint_functional.py) hold the larger cases; these are the minimal pairs,
so a regression names the rule at once."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddpdoctor.lint.engine import lint_source
from ddpdoctor.model.registry import REGISTRY
from ddpdoctor.pipeline.runner import load_lint_rules

load_lint_rules()
RULES = sorted(s.id for s in REGISTRY.values() if s.kind == "rule")

CASES = {
    "LINT001": ("""
        import torch.multiprocessing as mp
        from transformers import Trainer
        def run(rank):
            Trainer(model=None).train()
        if __name__ == "__main__":
            mp.spawn(run, nprocs=2)
        """, """
        from transformers import Trainer
        def run():
            Trainer(model=None).train()
        if __name__ == "__main__":
            run()
        """),
    "LINT002": ("""
        import os
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def run(rank):
            os.environ["MASTER_ADDR"] = "localhost"; os.environ["MASTER_PORT"] = "29500"
            dist.init_process_group("gloo", rank=rank, world_size=2)
        if __name__ == "__main__":
            mp.spawn(run, nprocs=2)
        """, """
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def run(rank):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=rank, world_size=2)
        if __name__ == "__main__":
            mp.spawn(run, nprocs=2)
        """),
    "LINT003": ("""
        import os
        def setup(rank):
            os.environ["RANK"] = str(rank)
        """, """
        import os
        def setup(rank, local):
            os.environ["RANK"] = str(rank); os.environ["LOCAL_RANK"] = str(local)
            os.environ["LOCAL_WORLD_SIZE"] = "2"
        """),
    "LINT004": ("""
        import torch.multiprocessing as mp
        def run(rank): pass
        mp.spawn(run, nprocs=2)
        """, """
        import torch.multiprocessing as mp
        def run(rank): pass
        if __name__ == "__main__":
            mp.spawn(run, nprocs=2)
        """),
    "LINT005": ("""
        import h5py
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, p):
                self.f = h5py.File(p, "r")
        """, """
        import h5py
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, p):
                with h5py.File(p, "r") as f:
                    self.n = len(f["x"])
        """),
    "LINT006": ("""
        from transformers import AutoTokenizer
        from torch.utils.data import DataLoader
        tok = AutoTokenizer.from_pretrained("gpt2")
        ids = tok(["a", "b"])
        if __name__ == "__main__":
            for b in DataLoader(ids["input_ids"], num_workers=2):
                pass
        """, """
        import os
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        from transformers import AutoTokenizer
        from torch.utils.data import DataLoader
        tok = AutoTokenizer.from_pretrained("gpt2")
        ids = tok(["a", "b"])
        if __name__ == "__main__":
            for b in DataLoader(ids["input_ids"], num_workers=2):
                pass
        """),
    "LINT007": ("""
        from torch.nn.parallel import DistributedDataParallel as DDP
        def f(m, x, rank):
            model = DDP(m)
            if rank == 0:
                model(x)
        """, """
        from torch.nn.parallel import DistributedDataParallel as DDP
        def f(m, x, rank):
            model = DDP(m)
            if rank == 0:
                model.module(x)
        """),
    "LINT008": ("""
        def step(model, batch):
            loss = model(batch)
            with model.no_sync():
                loss.backward()
        """, """
        def step(model, batch):
            with model.no_sync():
                loss = model(batch)
                loss.backward()
        """),
    "LINT009": ("""
        from torch.utils.data import DistributedSampler
        def train(ds, loader, epochs):
            s = DistributedSampler(ds)
            for e in range(epochs):
                for b in loader:
                    pass
        """, """
        from torch.utils.data import DistributedSampler
        def train(ds, loader, epochs):
            s = DistributedSampler(ds)
            for e in range(epochs):
                s.set_epoch(e)
                for b in loader:
                    pass
        """),
    "LINT010": ("""
        from torch.nn.parallel import DistributedDataParallel as DDP
        m = DDP(net, find_unused_parameters=True)
        """, """
        from torch.nn.parallel import DistributedDataParallel as DDP
        m = DDP(net, find_unused_parameters=False)
        """),
    "LINT011": ("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        s = torch.load("c.pt")
        """, """
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        s = torch.load("c.pt", map_location="cpu")
        """),
    "LINT012": ("""
        import torch
        m = torch.nn.DataParallel(net)
        """, """
        import torch
        m = torch.nn.parallel.DistributedDataParallel(net)
        """),
    "LINT013": ("""
        import torch, torch.distributed as dist
        def train(model, loader):
            dist.init_process_group("nccl")
            for b in loader:
                model(b).backward()
            torch.save(model.state_dict(), "m.pt")
        """, """
        import torch, torch.distributed as dist
        def train(model, loader):
            dist.init_process_group("nccl")
            for b in loader:
                model(b).backward()
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "m.pt")
        """),
    "LINT014": ("""
        import torch.distributed as dist
        from datasets import load_dataset
        dist.init_process_group("nccl")
        if dist.get_rank() == 0:
            load_dataset("big")
        dist.barrier()
        """, """
        import datetime, torch.distributed as dist
        from datasets import load_dataset
        dist.init_process_group("nccl", timeout=datetime.timedelta(hours=2))
        if dist.get_rank() == 0:
            load_dataset("big")
        dist.barrier()
        """),
    "LINT015": ("""
        from transformers import TrainingArguments
        a = TrainingArguments(output_dir="o", local_rank=3)
        """, """
        from transformers import TrainingArguments
        a = TrainingArguments(output_dir="o", local_rank=-1)
        """),
    "LINT016": ("""
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("nccl")
        s = DistributedSampler(ds)
        for b in DataLoader(ds, sampler=s):
            model(b).sum().backward()
            optimizer.step()
        """, """
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("nccl")
        s = DistributedSampler(ds)
        model = torch.nn.parallel.DistributedDataParallel(net)
        for b in DataLoader(ds, sampler=s):
            model(b).sum().backward()
            optimizer.step()
        """),
    "LINT017": ("""
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader
        dist.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(net)
        for b in DataLoader(train_set, shuffle=True):
            model(b).sum().backward()
        """, """
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("nccl")
        model = torch.nn.parallel.DistributedDataParallel(net)
        for b in DataLoader(train_set, sampler=DistributedSampler(train_set)):
            model(b).sum().backward()
        """),
    "LINT018": ("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        torch.cuda.set_device(dist.get_rank())
        """, """
        import os, torch, torch.distributed as dist
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        """),
    "LINT019": ("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        for step in range(10):
            dist.all_reduce(x)
            if dist.get_rank() == 0 and x.item() > 1:
                break
        """, """
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        for step in range(10):
            dist.all_reduce(x)
            if x.item() > 1:
                break
        """),
    "LINT020": ("""
        import deepspeed, torch.distributed as dist
        engine, opt, _, _ = deepspeed.initialize(model=net, model_parameters=net.parameters())
        if dist.get_rank() == 0:
            engine.save_checkpoint("ckpt")
        """, """
        import deepspeed, torch.distributed as dist
        engine, opt, _, _ = deepspeed.initialize(model=net, model_parameters=net.parameters())
        engine.save_checkpoint("ckpt")
        """),
    "LINT021": ("""
        import torch, torch.distributed as dist
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(net)
        if dist.get_rank() == 0:
            torch.save(model.state_dict(), "ckpt.pt")
        """, """
        import torch, torch.distributed as dist
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(net)
        state = model.state_dict()
        if dist.get_rank() == 0:
            torch.save(state, "ckpt.pt")
        """),
    "LINT022": ("""
        import os, torch.distributed as dist
        dist.init_process_group("nccl", rank=int(os.environ["LOCAL_RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
        """, """
        import os, torch.distributed as dist
        dist.init_process_group("nccl", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
        """),
    "LINT023": ("""
        import torch.distributed as dist
        dist.init_process_group("nccl", timeout=600)
        """, """
        import datetime, torch.distributed as dist
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=600))
        """),
    "LINT024": ("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(net, opt, path):
            model = DDP(net)
            if dist.get_rank() == 0:
                model.module.load_state_dict(torch.load(path, map_location="cpu"))
            for x in range(10):
                model(x).sum().backward()
                opt.step()
        """, """
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(net, opt, path):
            if dist.get_rank() == 0:
                net.load_state_dict(torch.load(path, map_location="cpu"))
            model = DDP(net)
            for x in range(10):
                model(x).sum().backward()
                opt.step()
        """),
    "LINT025": ("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        if dist.get_rank() == 0:
            dist.broadcast(torch.zeros(1), 0)
        """, """
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        dist.broadcast(torch.zeros(1), 0)
        """),
    "LINT026": ("""
        import torch.distributed as dist
        def sync(model):
            for p in model.parameters():
                dist.all_reduce(p.grad)
        """, """
        import torch.distributed as dist
        def sync(model):
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= dist.get_world_size()
        """),
    "LINT027": ("""
        import torch.distributed as dist
        from torchvision import datasets
        dist.init_process_group("nccl")
        train = datasets.MNIST("./data", download=True)
        """, """
        import torch.distributed as dist
        from torchvision import datasets
        dist.init_process_group("nccl")
        if dist.get_rank() != 0:
            dist.barrier()
        train = datasets.MNIST("./data", download=True)
        if dist.get_rank() == 0:
            dist.barrier()
        """),
    "LINT028": ("""
        import os
        import torch.distributed as dist
        dist.init_process_group("nccl")
        if not os.path.exists("out"):
            os.makedirs("out")
        """, """
        import os
        import torch.distributed as dist
        dist.init_process_group("nccl")
        os.makedirs("out", exist_ok=True)
        """),
    "LINT029": ("""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("nccl")
        model = DDP(net)
        def step(batch):
            loss = model.module.compute_loss(batch)
            loss.backward()
        """, """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("nccl")
        model = DDP(net)
        def step(batch):
            loss = model(batch)
            loss.backward()
        """),
    "LINT030": ("""
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=8, shuffle=True, sampler=DistributedSampler(ds))
        """, """
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, batch_size=8, shuffle=False, sampler=DistributedSampler(ds))
        """),
    "LINT031": ("""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        if dist.get_rank() == 0:
            sched.step(val_loss)
        """, """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
        sched.step(val_loss)
        """),
    "LINT032": ("""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        def step(x, y):
            loss = crit(model(x), y) / dist.get_world_size()
            loss = loss / dist.get_world_size()
            loss.backward()
        """, """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(net)
        def step(x, y):
            loss = crit(model(x), y)
            loss.backward()
        """),
    "LINT033": ("""
        import os, random
        import torch.distributed as dist
        def worker(rank, world_size):
            os.environ["MASTER_PORT"] = str(random.randint(20000, 30000))
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
        """, """
        import os
        import torch.distributed as dist
        def worker(rank, world_size, port):
            os.environ["MASTER_PORT"] = str(port)
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
        """),
    "LINT034": ("""
        import torch
        import torch.distributed as dist
        from torch.utils.data import random_split
        def build(args, ds):
            dist.init_process_group("nccl")
            g = torch.Generator().manual_seed(args.seed + dist.get_rank())
            return random_split(ds, [0.9, 0.1], generator=g)
        """, """
        import torch
        import torch.distributed as dist
        from torch.utils.data import random_split
        def build(args, ds):
            dist.init_process_group("nccl")
            g = torch.Generator().manual_seed(args.seed)
            return random_split(ds, [0.9, 0.1], generator=g)
        """),
    "LINT035": ("""
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def worker(rank, cfg):
            dist.init_process_group("nccl", rank=rank, world_size=4)
        if __name__ == "__main__":
            mp.spawn(worker, nprocs=torch.cuda.device_count(), args=(None,))
        """, """
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        def worker(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
        if __name__ == "__main__":
            n = torch.cuda.device_count()
            mp.spawn(worker, nprocs=n, args=(n,))
        """),
    "LINT036": ("""
        import torch
        model = torch.nn.DataParallel(model)
        model.freeze_feature_encoder()
        """, """
        import torch
        model = torch.nn.DataParallel(model)
        model.module.freeze_feature_encoder()
        model.eval()
        """),
    "LINT037": ("""
        import torch
        import torch.distributed as dist
        def main(model, rank):
            dist.init_process_group("nccl")
            if rank == 0:
                torch.save(model.state_dict(), "init.pt")
            model.load_state_dict(torch.load("init.pt", map_location="cpu"))
        """, """
        import torch
        import torch.distributed as dist
        def main(model, rank):
            dist.init_process_group("nccl")
            if rank == 0:
                torch.save(model.state_dict(), "init.pt")
            dist.barrier()
            model.load_state_dict(torch.load("init.pt", map_location="cpu"))
        """),
    "LINT090": ("def f(:\n    pass\n", "def f():\n    pass\n"),
    "LINT091": (b"import torch\x00\x01", b"import torch\n"),  # bytes: written to a file first
    "LINT039": ({"README.md": "torchrun --nproc_per_node 2 train.py\n", "train.py": """
        import argparse, torch
        import torch.distributed as dist
        parser = argparse.ArgumentParser()
        parser.add_argument("--local-rank", type=int, default=-1)
        args = parser.parse_args()
        dist.init_process_group("nccl")
        torch.cuda.set_device(args.local_rank)
        """}, {"README.md": "python -m torch.distributed.launch --nproc_per_node 2 train.py\n", "train.py": """
        import argparse, torch
        import torch.distributed as dist
        parser = argparse.ArgumentParser()
        parser.add_argument("--local-rank", type=int, default=-1)
        args = parser.parse_args()
        dist.init_process_group("nccl")
        torch.cuda.set_device(args.local_rank)
        """}),
    "LINT038": ("""
        import os, time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        run_dir = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
        os.makedirs(run_dir, exist_ok=True)
        """, """
        import os, time
        import torch.distributed as dist
        dist.init_process_group("gloo")
        run_dir = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
        if dist.get_rank() == 0:
            os.makedirs(run_dir, exist_ok=True)
        """),
    "LINT040": ("""
        import torch, deepspeed
        model = torch.nn.Linear(2, 2)
        engine, _, _, _ = deepspeed.initialize(model=model, config={"zero_optimization": {"stage": 3}})
        torch.save(engine.module.state_dict(), "model.pt")
        """, """
        import torch, deepspeed
        model = torch.nn.Linear(2, 2)
        engine, _, _, _ = deepspeed.initialize(model=model, config={"zero_optimization": {"stage": 2}})
        torch.save(engine.module.state_dict(), "model.pt")
        """),
    "LINT041": ({"README.md": "torchrun --nproc_per_node 2 train.py\n", "train.py": """
        from datasets import load_dataset
        raw = load_dataset("imdb")
        tokenized = raw.map(lambda b: {"n": len(b["text"])}, batched=True)
        """}, {"README.md": "torchrun --nproc_per_node 2 train.py\n", "train.py": """
        from datasets import load_dataset
        from transformers import TrainingArguments
        args = TrainingArguments("out")
        raw = load_dataset("imdb")
        with args.main_process_first():
            tokenized = raw.map(lambda b: {"n": len(b["text"])}, batched=True)
        """}),
    "LINT042": ("""
        import os
        if os.environ["RANK"] == 0:
            print("rank 0")
        """, """
        import os
        if int(os.environ["RANK"]) == 0:
            print("rank 0")
        """),
    "LINT043": ({"README.md": "python -m torch.distributed.launch --nproc_per_node 2 train.py\n", "train.py": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", type=float)
        args = parser.parse_args()
        """}, {"README.md": "python -m torch.distributed.launch --nproc_per_node 2 train.py\n", "train.py": """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", type=float)
        parser.add_argument("--local-rank", "--local_rank", type=int)
        args = parser.parse_args()
        """}),  # both spellings (torch >= 2.0 passes --local-rank; round 23: --local_rank alone is a note)
    "LINT044": ("""
        import torch.distributed as dist
        def report(t):
            dist.all_reduce(t, async_op=True)
            print(t)
        """, """
        import torch.distributed as dist
        def report(t):
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            print(t)
        """),
    "LINT045": ("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def train(net, epochs):
            model = DDP(net)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 10)
            for _ in range(epochs):
                if dist.get_rank() == 0:
                    sched.step()
        """, """
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def train(net, epochs):
            model = DDP(net)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 10)
            for _ in range(epochs):
                sched.step()
                if dist.get_rank() == 0:
                    print(sched.get_last_lr())
        """),
    "LINT046": ("""
        import os, torch
        def setup(net):
            net = net.cuda()
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            return net
        """, """
        import os, torch
        def setup(net):
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            net = net.cuda()
            return net
        """),
}


def ids_for(src: str, rule: str) -> list:
    return [f.id for f in lint_source(textwrap.dedent(src), "snippet.py") if f.id == rule]


def file_ids_for(data: bytes, rule: str, tmp_path) -> list:
    from ddpdoctor.lint.api import lint_paths

    path = tmp_path / "snippet.py"
    path.write_bytes(data)
    return [f.id for f in lint_paths([str(path)]).findings if f.id == rule]


def project_ids_for(files: dict, rule: str, folder) -> list:
    """Lint train.py of a small project (its README next to it): the rules that read launch lines."""
    from ddpdoctor.lint.api import lint_paths

    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return [f.id for f in lint_paths([str(folder / "train.py")]).findings if f.id == rule]


@pytest.mark.parametrize("rule", RULES)
def test_rule_triggers_and_stays_quiet(rule, tmp_path):
    bad, good = CASES[rule]
    if isinstance(bad, dict):   # a rule that reads the project around the script (a README's launch line)
        assert project_ids_for(bad, rule, tmp_path / "bad") == [rule], f"{rule} should fire"
        assert project_ids_for(good, rule, tmp_path / "good") == [], f"{rule} should stay quiet"
        return
    if isinstance(bad, bytes):
        assert file_ids_for(bad, rule, tmp_path) == [rule] and file_ids_for(good, rule, tmp_path) == []
        return
    assert ids_for(bad, rule) == [rule], f"{rule} should fire"
    assert ids_for(good, rule) == [], f"{rule} should stay quiet"


@pytest.mark.parametrize("rule", RULES)
def test_rule_is_registered_and_documented(rule):
    spec = REGISTRY[rule]
    assert spec.kind == "rule" and spec.family == "lint"
    parts = spec.sections()
    for heading in ("What it checks", "Why it matters", "Example", "Fix"):
        assert parts.get(heading), f"{rule} lacks {heading}"


def test_catalogue_ids_of_the_issue_are_covered():
    cited = {c for r in RULES for c in REGISTRY[r].catalogue}
    assert {"A1", "A5", "A6", "E3", "E4", "D1", "F8", "F5", "F10", "F3", "A10", "F12", "F11"} <= cited


def test_every_finding_has_line_and_path_subjects():
    src = CASES["LINT001"][0] + CASES["LINT013"][0].replace("import torch, torch.distributed as dist", "")
    for f in lint_source(textwrap.dedent(CASES["LINT013"][0]), "x.py") + lint_source(
            textwrap.dedent(CASES["LINT001"][0]), "y.py"):
        line = f.evidence["line"]
        assert f"line:{line}" in f.subjects and f.evidence["path"] in ("x.py", "y.py")
        assert f"path:{f.evidence['path']}" in f.subjects and f.fix and f.title.startswith(f.evidence["path"])
    assert src


def test_ignore_comment_accepts_id_slug_and_catalogue():
    base = "import torch\nm = torch.nn.DataParallel(net)  # ddpdoctor: ignore[{}]\n"
    for token in ("LINT012", "data-parallel", "F1", "lint012"):
        assert not lint_source(base.format(token)), token
    assert [f.id for f in lint_source(base.format("LINT011"))] == ["LINT012"]


def test_the_script_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\nimport torch.multiprocessing as mp\n"
    assert lint_source(src) == [] and not marker.exists()


def test_deeply_nested_code_is_one_finding_not_a_crash():
    src = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    found = lint_source(src, "deep.py")
    assert len(found) == 1 and found[0].id in ("LINT090", "LINT091")


def test_long_elif_chains_are_analysed_not_rejected():
    # 1500 nested `If` nodes (an elif chain is an If in its parent's orelse): deeper than a recursive walk gets; a
    # finding every 25 branches, the last one 1499 levels down, shows the deep arms are analysed (a finding in every
    # arm made each rule's per-finding work the test's cost, not the depth)
    src = "import torch\nx = 1\nif x == 0:\n    pass\n" + "".join(
        f"elif x == {i}:\n    m = torch.nn.DataParallel(n)\n" if i % 25 == 24 else f"elif x == {i}:\n    m = {i}\n"
        for i in range(1, 1500))
    found = lint_source(src, "elif.py")
    assert len(found) == 60 and {f.id for f in found} == {"LINT012"}
    assert max(f.evidence["line"] for f in found) == 4 + 2 * 1499


def _sev(src: str, rule: str) -> list:
    return sorted(f.severity for f in lint_source(textwrap.dedent(src), "s.py") if f.id == rule)


def test_severities_follow_the_consequence():
    # A spawn context always re-imports the script; the default start method only on some platforms.
    procs = (Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "hard_process_unguarded.py").read_text()
    assert _sev(procs, "LINT004") == ["error", "error"]  # the spawn context makes both spawn
    assert _sev(procs.replace('ctx = tmp.get_context("spawn")', "ctx = tmp"), "LINT004") == ["warning", "warning"]
    # TOKENIZERS_PARALLELISM forced on: a measured deadlock, so an error.
    forced = 'import os\nos.environ["TOKENIZERS_PARALLELISM"] = "true"\n' + textwrap.dedent(CASES["LINT006"][0])
    assert _sev(forced, "LINT006") == ["error"] and _sev(CASES["LINT006"][0], "LINT006") == ["info"]
    # Under no_grad a DDP forward on rank 0 gets through when the model has no buffers: a warning when buffers are
    # shown (BatchNorm in the project's code), a note when they are unknown; never an error.
    no_grad = CASES["LINT007"][0].replace("                model(x)", "                with torch.no_grad():\n"
                                                                       "                    model(x)")
    assert _sev("import torch\n" + textwrap.dedent(no_grad), "LINT007") == ["info"]
    assert _sev("import torch\nNORM = torch.nn.BatchNorm1d\n" + textwrap.dedent(no_grad), "LINT007") == ["warning"]
    assert _sev(CASES["LINT007"][0], "LINT007") == ["error"]
    # Only the rendezvous address set by hand: a note; the rank itself: a warning.
    assert _sev('import os\nos.environ["MASTER_PORT"] = "1"\n', "LINT003") == ["info"]
    # the rank itself with a reader of LOCAL_RANK in the run: a warning; with none (round 24, lint32): a note
    assert _sev(textwrap.dedent(CASES["LINT003"][0]) + "import accelerate\n", "LINT003") == ["warning"]
    assert _sev(CASES["LINT003"][0], "LINT003") == ["info"]


# ------------------------------------------------------------------------------------------------
# Cases found in review: setdefault of MASTER_* is not hand-set env; LOCAL_RANK set by the script.

def lint(src):
    return lint_source(textwrap.dedent(src), "train.py")


def test_setdefault_of_master_vars_in_a_torchrun_script_is_not_hand_set_env():
    # A defensive default for a missing launcher, like `if "MASTER_ADDR" not in os.environ:`.
    found = lint("""
        import os
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "localhost")
        os.environ.setdefault("MASTER_PORT", "29500")
        def main():
            dist.init_process_group("gloo")
            local_rank = int(os.environ["LOCAL_RANK"])
        if __name__ == "__main__":
            main()
        """)
    assert [f.id for f in found if f.id == "LINT003"] == []


def test_spawn_finding_does_not_claim_local_rank_is_missing_when_the_script_sets_it():
    found = lint("""
        import os
        import torch.multiprocessing as mp
        import torch.distributed as dist
        def worker(rank, world_size):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "12355"
            os.environ["LOCAL_RANK"] = str(rank)
            os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
        """)
    lint002 = [f for f in found if f.id == "LINT002"]
    assert len(lint002) == 1
    assert "LOCAL_RANK" not in lint002[0].title and "LOCAL_RANK" not in lint002[0].detail


def test_spawn_finding_still_names_missing_local_rank():
    found = lint("""
        import os
        import torch.multiprocessing as mp
        import torch.distributed as dist
        def worker(rank, world_size):
            os.environ["MASTER_ADDR"] = "localhost"
            os.environ["MASTER_PORT"] = "12355"
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
        """)
    assert any(f.id == "LINT002" and "LOCAL_RANK" in f.title for f in found)
