"""Redaction catches real credentials by format, alphabet and context, and leaves innocent text alone."""
import pytest

from ddpdoctor.model.redact import REDACTED, redact_text, redact_tree
from test_robustness import NAMED_SECRETS, SECRETS

# Text that looks like a token to a careless pattern: file and module names, identifiers, digests,
# UUIDs, paths and prose. Each must come out of redaction byte for byte.
INNOCENT = [
    "llmfoundry/callbacks/hf_checkpointer.py",
    "llmfoundry/callbacks/hf_checkpointer.py:212: torch.distributed.barrier() under if rank == 0",
    "from composer.callbacks import hf_checkpointer",
    "sk_learn_utils",
    "import sk_learn_utils.metrics as m",
    "ghp_mirror",
    "scripts/ghp_mirror_sync_all_repositories.sh",
    "ghp_mirror_configuration_for_internal_servers",
    "hf_CheckpointerCallbackForTraining",
    "hf_Llama2ChatModelForCausalLM",
    "hf_hub_download_with_retries_and_backoff",
    "api_org_settings_page_for_members",
    "github_pat_rotation_helper_script_for_ci",
    "sk-learn-compatible-wrapper-for-models",
    "task-sk-learn-pipeline",
    "risk-management-framework-v2-final",
    "npm_config_cache_directory_for_builds",
    "pypi-simple-index-mirror-for-internal-use",
    "xoxb-bot-notifications-channel",
    "AIza_project_config_loader_module",
    "sha256:3f786850e387550fdab836ed7e6dc881de23001b3f786850e387550fdab836ed",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "550e8400-e29b-41d4-a716-446655440000",
    "GPU-4c2a9b3e-8f1d-4e6a-b7c5-0d9e8f7a6b5c",
    "MIG-6f1d2e3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "a basic configuration_for_the_trainer",
    "Using basic /usr/lib/python3.11/site-packages/torch/distributed/run.py",
    "bearer tokens are described in docs/auth_design_notes.md",
    "TOKENIZERS_PARALLELISM=false",
    "run_mlm.py --model_name_or_path bert-base-uncased --output_dir /tmp/test-mlm",
    "model.layers.11.self_attn.q_proj.weight",
    "ncclCommInitRank comm 0x55d1c8a0b2f0 rank 1 nranks 2 cudaDev 1 busId 3b000",
    "ssh://git@github.com:org/repo.git",
    "registry.example.com:5000/team/img@sha256:3f786850e387550fdab836ed7e6dc881",
    "AKIA_ROTATION_POLICY",
    "eyJustAWord.eyJust.another",
]


def test_innocent_look_alikes_are_left_untouched():
    for text in INNOCENT:
        assert redact_text(text) == text, text


def test_innocent_paths_survive_in_a_report_tree():
    tree = {"findings": [{"id": "LNT001", "evidence": {"file": INNOCENT[0], "line": 212}, "title": INNOCENT[1]}],
            "TOKENIZERS_PARALLELISM": "false"}
    assert redact_tree(tree) == tree


@pytest.mark.parametrize("value,core", SECRETS)
def test_every_secret_form_is_still_caught(value, core):
    for wrapped in (value, f"token={value}", f"'{value}'", f"export X={value}\n", f"see {value} here",
                    f"https://host/path?x=1 {value}"):
        out = redact_text(wrapped)
        assert core not in out, wrapped
        assert REDACTED in out


def test_the_corpus_has_all_27_forms():
    assert len(SECRETS) + len(NAMED_SECRETS) == 27


def test_named_secrets_are_caught_by_name_in_a_tree():
    out = redact_tree(dict(NAMED_SECRETS))
    assert all(v == REDACTED for v in out.values())


REAL_LENGTH = [
    "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi",  # 34 letters
    "api_org_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi",
    "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6",  # 36 base62
    "github_pat_" + "11AB3DE6GH9JK2MN5PQ8ST_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2mN5pQ8sT1vW4y",
    "sk-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6aB3dE6gH9jK2",  # 48
    "AKIA" + "Z7QW2ERT4YUI6OPA",
]


@pytest.mark.parametrize("token", REAL_LENGTH)
def test_tokens_of_the_documented_lengths_are_caught(token):
    assert redact_text(f"x {token} y") == f"x {REDACTED} y"


def test_authorization_header_keeps_its_scheme():
    assert redact_text("Authorization: Bearer abcDEF123456ghiJKL789mno") == f"Authorization: Bearer {REDACTED}"


def test_random_tokens_of_documented_lengths_are_all_caught():
    import random
    import string
    rng = random.Random(13)
    b62 = string.ascii_letters + string.digits
    for prefix, alphabet, n in [("hf_", string.ascii_letters, 34), ("ghp_", b62, 36), ("gho_", b62, 36),
                                ("sk-", b62, 48), ("npm_", b62, 36), ("glpat-", b62 + "_-", 20),
                                ("sk-proj-", b62 + "_-", 120), ("AIza", b62 + "_-", 35)]:
        for _ in range(2000):
            token = prefix + "".join(rng.choice(alphabet) for _ in range(n))
            assert redact_text(f"v={token};") == f"v={REDACTED};", token


def test_a_token_holding_another_prefix_goes_whole():
    token = "sk-proj-ebFPUx-LLQhb4aNV4e7EWOKQ-k9Su-hf_nFm4uSNgp2apwkrQ4JyghwN7VwcTEQpfYt3SanT_V23a9uWGnMQ"
    assert redact_text(token) == REDACTED
    # ...and a real token inside an identifier that is not one is still caught.
    assert redact_text("my_module.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") == f"my_module.{REDACTED}"


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", [[], ["--format", "json"]])
def test_lint_keeps_a_module_named_like_a_token_traceable(tmp_path, fmt):
    import subprocess
    import sys
    pkg = tmp_path / "llmfoundry" / "callbacks"
    pkg.mkdir(parents=True)
    (pkg / "hf_checkpointer.py").write_text('import os\n\ndef setup():\n    os.environ["RANK"] = "0"\n'
                                            '    os.environ["WORLD_SIZE"] = "2"\n')
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "lint", str(tmp_path), *fmt], capture_output=True,
                         text=True, timeout=90)
    assert "LINT003" in res.stdout
    assert "callbacks/hf_checkpointer.py" in res.stdout and REDACTED not in res.stdout
