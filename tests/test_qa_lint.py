"""QA: lint findings on correct-but-unusual scripts must be absent, or say what the script really does."""
import textwrap

from ddpdoctor.lint.engine import lint_source


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
