"""QA: `ddpdoctor check` run by every task of an srun step joins that job, as under torchrun."""
import pytest


@pytest.mark.parametrize("env,joined", [
    ({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1",
      "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "node01"}, True),   # srun ddpdoctor check
    ({"WORLD_SIZE": "2"}, False),                                              # a shell: local test
])
def test_check_under_srun_joins_the_job(monkeypatch, env, joined):
    import ddpdoctor.comm.api as api
    from factory import make_snapshot

    for k in ("RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    calls = []
    monkeypatch.setattr(api, "run_joined", lambda environ, **kw: calls.append("joined") or {"unavailable": "x"})
    monkeypatch.setattr(api, "run_local", lambda **kw: calls.append("local") or {"unavailable": "x"})
    api.comm_section_for_check(make_snapshot(env=env))
    assert calls == (["joined"] if joined else ["local"])
