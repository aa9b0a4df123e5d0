"""model/redact.py's speed-ups keep every answer: redact_text's memo is emptied when the environment changes (a secret
set after a text was first seen is still hidden in it), stays bounded, and the prefilters skip no pattern's match."""
from __future__ import annotations

from ddpdoctor.model import redact


def test_a_secret_set_after_the_text_was_seen_is_still_hidden(monkeypatch):
    monkeypatch.delenv("SUITE25_DB_PASSWORD", raising=False)
    line = "connect failed for s3cr3t-value-9f2 on db01"
    assert redact.redact_text(line) == line  # seen once, remembered as it is
    assert redact.redact_tree({"msg": line}) == {"msg": line}
    monkeypatch.setenv("SUITE25_DB_PASSWORD", "s3cr3t-value-9f2")
    assert redact.redact_text(line) == "connect failed for <redacted> on db01"
    assert redact.redact_tree({"msg": [line]}) == {"msg": ["connect failed for <redacted> on db01"]}
    monkeypatch.delenv("SUITE25_DB_PASSWORD")
    assert redact.redact_text(line) == line


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(redact, "_MEMO_MAX", 50)
    redact._MEMO.clear()
    for i in range(500):
        redact.redact_text(f"line {i}")
    assert 0 < len(redact._MEMO) <= 50
    long = "x" * (redact._MEMO_TEXT_MAX + 1)
    assert redact.redact_text(long) == long and long not in redact._MEMO


def test_the_prefilters_are_necessary_conditions_of_every_pattern():
    # each pattern's own match starts with a text the prefilter finds: one real-format token per pattern
    tokens = ["AKIAIOSFODNN7EXAMPLE", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXgx",
              "https://h/x?token=abcdef123456", "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
              "wandb login 0123456789abcdef0123456789abcdef01234567"]
    for text, pat in zip(tokens, redact._PATTERNS):
        assert pat.search(text) and redact._ANY_PATTERN.search(text), text
        assert redact.redact_text(text) != text
    samples = ["hf_", "api_org_", "ghp_", "github_pat_", "glpat-", "sk-proj-", "sk_live_", "xoxb-", "AIza", "npm_",
               "pypi-", "Bearer "]  # one per entry of _PREFIXED, in its order
    assert len(samples) == len(redact._PREFIXED)
    body = "Ab3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5"
    for sample, (pat, _shortest, _exact) in zip(samples, redact._PREFIXED_RES):
        text = f"x {sample}{body} y"
        assert pat.search(text) and redact._ANY_PREFIX.search(text), sample
        assert redact.redact_text(text) != text, sample
    assert redact._ANY_PREFIX.search("no credential here") is None
