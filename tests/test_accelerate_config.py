"""accelerate's default config file (read like accelerate does, without YAML on the check path) against
the GPUs the environment gives the job: ENV013 (issue 26, batch 12: huggingface/accelerate#1643)."""
import os

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.host import accelerate_config

WORKSTATION = {"distributed_type": "MULTI_GPU", "num_processes": 8, "num_machines": 1, "gpu_ids": "0,1,2,3,4,5,6,7"}
SLURM = {"SLURM_JOB_ID": "88121", "SLURM_NTASKS": "1", "CUDA_VISIBLE_DEVICES": "0,1,2"}


def test_the_default_config_is_found_where_accelerate_looks(tmp_path):
    home = tmp_path / "hf" / "accelerate"
    home.mkdir(parents=True)
    (home / "default_config.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                                             "gpu_ids: 0,1,2,3,4,5,6,7\nnum_processes: 8\nfsdp_config: {}\n"
                                             "main_process_ip: null\n")
    cfg = accelerate_config(Sources(environ={"HF_HOME": str(tmp_path / "hf")}))
    assert cfg["values"] == {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU",
                             "gpu_ids": "0,1,2,3,4,5,6,7", "num_processes": 8, "main_process_ip": None}
    xdg = {"XDG_CACHE_HOME": str(tmp_path / "nothing"), "HOME": str(tmp_path)}
    assert accelerate_config(Sources(environ=xdg)) is None
    os.makedirs(tmp_path / ".cache" / "huggingface" / "accelerate")
    (tmp_path / ".cache" / "huggingface" / "accelerate" / "default_config.yaml").write_text("num_processes: 2\n")
    assert accelerate_config(Sources(environ={"HOME": str(tmp_path)}))["values"] == {"num_processes": 2}


def _snap(env, values):
    return make_snapshot(env=env, host={"accelerate_config": {"path": "~/.cache/huggingface/accelerate/default_config.yaml",
                                                              "values": values}})


def test_env013_a_workstation_config_inside_a_smaller_allocation():
    [f] = findings_of(_snap(SLURM, WORKSTATION), "ENV013")
    assert f.severity == "warning" and "adds GPU(s) 3,4,5,6,7" in f.title and "num_processes 8" in f.title
    assert "--num_processes 3" in f.fix


def test_env013_quiet_when_the_config_fits_or_nothing_restricts_the_gpus():
    assert findings_of(_snap(SLURM, dict(WORKSTATION, num_processes=3, gpu_ids="all")), "ENV013") == []
    assert findings_of(_snap(SLURM, dict(WORKSTATION, num_processes=3, gpu_ids="0,1,2")), "ENV013") == []
    assert findings_of(_snap({"SLURM_JOB_ID": "1"}, WORKSTATION), "ENV013") == []  # all GPUs visible: accelerate decides
    assert findings_of(make_snapshot(env=SLURM), "ENV013") == []  # no config file
