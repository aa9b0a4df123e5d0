"""Secrets never leave the process: not in text, JSON, markdown, nor in snapshot files.

Two layers. Env values whose *names* look secret are replaced when the env section is gathered.
Then every string of every output goes through `redact_tree`, which replaces values that *look*
like credentials wherever they hide: under an innocent variable name, inside a URL, in an error
message or a command line.
"""
from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

# Judged per underscore-separated part of the name, so HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY,
# DB_PASSWORD and MY_AUTHTOKEN are secret while TOKENIZERS_PARALLELISM is not.
_SECRET_PART = re.compile(
    r"^(.*TOKEN|.*SECRET.*|.*PASSW(OR)?D.*|.*PASSPHRASE.*|PWD|.*CREDENTIALS?|.*COOKIE.*|.*KEY|APIKEY.*|.*AUTH.*"
    r"|SESSION.*|.*PRIVATE.*|SIG|SIGNATURE|DSN)$"
)
# Names that match the pattern above but are not secrets and are useful to see.
_SAFE_NAMES = {
    "NCCL_IB_PKEY", "PWD", "OLDPWD", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
}

_PATTERNS = [
    # Hugging Face, GitHub, OpenAI/Anthropic-style, Slack, Google, Stripe-like, npm, PyPI tokens.
    re.compile(r"\bhf_[A-Za-z0-9]{10,}"),
    re.compile(r"\bapi_org_[A-Za-z0-9]{10,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\bnpm_[A-Za-z0-9]{30,}"),
    re.compile(r"\bpypi-[A-Za-z0-9_\-]{30,}"),
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    # JSON Web Tokens: three base64url parts, the first two JSON objects ("eyJ").
    re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
    # Weights & Biases keys are 40 hex chars; long hex/base64 blobs after key= in URLs.
    re.compile(r"(?i)(?<=[?&])(?:token|key|api_key|apikey|access_token|secret|password|sig|signature)=[^&\s\"']+"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    # Authorization headers.
    re.compile(r"(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/\-]{12,}=*"),
]
# user:password@host inside URLs: keep the user and host, drop the password.
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")


def name_is_secret(name: str) -> bool:
    upper = name.upper()
    if upper in _SAFE_NAMES:
        return False
    return any(_SECRET_PART.match(part) for part in re.split(r"[_\-.]", upper) if part)


def redact_text(text: str) -> str:
    """Replace anything in `text` that looks like a credential."""
    if not text:
        return text
    out = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", text)
    for pat in _PATTERNS:
        out = pat.sub(REDACTED, out)
    return out


def redact_env_value(name: str, value: str) -> str:
    if name_is_secret(name):
        return REDACTED
    return redact_text(value)


def redact_tree(obj: Any, _depth: int = 0) -> Any:
    """Return a copy of a JSON-like tree with every string (keys too) passed through redact_text."""
    if _depth > 64:
        return REDACTED
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = redact_text(k) if isinstance(k, str) else k
            if isinstance(k, str) and isinstance(v, str) and name_is_secret(k) and _looks_like_env_name(k):
                out[key] = REDACTED if v else v
            else:
                out[key] = redact_tree(v, _depth + 1)
        return out
    if isinstance(obj, (list, tuple)):
        return [redact_tree(v, _depth + 1) for v in obj]
    return obj


def _looks_like_env_name(name: str) -> bool:
    # Only upper-case env-style keys are treated as secret by name; a JSON key like "tokenizers"
    # in a package list is not a secret.
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", name))
