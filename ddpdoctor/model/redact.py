"""Secrets never leave the process: not in text, JSON, markdown, nor in snapshot files.

Two layers. Env values whose *names* look secret are replaced when the env section is gathered.
Then every string of every output goes through `redact_tree`, which replaces values that *look*
like credentials wherever they hide: under an innocent variable name, inside a URL, in an error
message or a command line.
"""
from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from typing import Any, Mapping, Optional

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

def _case_mixed(core: str) -> bool:
    """Upper and lower case in roughly equal parts, and not CamelCase words: in `Llama2ChatModel` the
    capitals open lower-case runs of 2+ letters (3 on average); random base62 has many 1-letter runs."""
    up = sum(c.isupper() for c in core)
    lo = sum(c.islower() for c in core)
    letters = up + lo
    if letters < 4 or up < 0.2 * letters or lo < 0.2 * letters:
        return False
    runs = [len(r) for r in re.findall(r"[a-z]+", core)]
    opens = len(re.findall(r"[A-Z](?=[a-z])", core))
    camel = sum(runs) / len(runs) >= 3 and runs.count(1) <= 0.1 * len(runs) and opens >= 0.6 * up
    return not camel


def _mixed(core: str) -> bool:
    """True when `core` (separators removed) has the character mix of a random token: mixed case
    (see `_case_mixed`), or letters and several digits. Words, paths and identifiers do not:
    `checkpointer` (one case), `CheckpointerCallback` (CamelCase), `python3` (one digit)."""
    if _case_mixed(core):
        return True
    dg = sum(c.isdigit() for c in core)
    letters = sum(c.isalpha() for c in core)
    return dg >= max(2, len(core) // 10) and letters >= max(2, len(core) // 5)


def _strict(core: str) -> bool:
    """Stricter mix for weak context (a bare `Bearer x` / `Basic x`): mixed case, or a quarter digits
    that alternate with letters, so paths such as /usr/lib/python3.11 are left alone."""
    if _case_mixed(core):
        return True
    dg = sum(c.isdigit() for c in core)
    letters = sum(c.isalpha() for c in core)
    flips = sum(1 for a, b in zip(core, core[1:]) if a.isdigit() != b.isdigit())
    return dg >= 0.25 * len(core) and letters >= 0.25 * len(core) and flips >= 4


# Prefixed tokens: (prefix regex, body alphabet, shortest body, documented body lengths). The prefix must
# start a token (no letter or digit before it) and the body must run to the end of the token, so
# `hf_checkpointer.py`, `sk_learn_utils` and `ghp_mirror` are identifiers, not tokens: too short, one
# case, no digits. Real formats (documented by the issuers): Hugging Face `hf_` + 34 letters,
# `api_org_` + 34; GitHub `ghp_/gho_/ghu_/ghs_/ghr_` + 36 base62 (up to 255), `github_pat_` + 22 + `_`
# + 59; GitLab `glpat-` + 20; OpenAI `sk-` + 48 and `sk-proj-` + longer base64url; Anthropic
# `sk-ant-`; Stripe `sk_live_`/`rk_test_`...; Slack `xox?-`; Google `AIza` + 35; npm `npm_` + 36;
# PyPI `pypi-` + macaroon. Shortest bodies are set below the real lengths so a truncated paste is
# still caught; the character mix is what separates a token from a name. A body of exactly a
# documented length needs only two character classes (so no random token slips through); any other
# length needs `_mixed`. `None` marks the weak context of a bare `Bearer`/`Basic`: `_strict`.
_PREFIXED = [
    (r"hf_", r"[A-Za-z0-9]", 24, (34,)),
    (r"api_org_", r"[A-Za-z0-9]", 24, (34,)),
    (r"(?:ghp|gho|ghu|ghs|ghr)_", r"[A-Za-z0-9]", 30, (36,)),
    (r"github_pat_", r"[A-Za-z0-9_]", 30, (81,)),
    (r"glpat-", r"[A-Za-z0-9_\-]", 16, (20,)),
    (r"sk-(?:ant-|proj-|live-|test-|svcacct-|admin-)?", r"[A-Za-z0-9_\-]", 20, (48,)),
    (r"(?:rk|pk|sk)_(?:live|test)_", r"[A-Za-z0-9]", 16, ()),
    (r"xox[abprs]-", r"[A-Za-z0-9\-]", 16, ()),
    (r"AIza", r"[0-9A-Za-z_\-]", 30, (35,)),
    (r"npm_", r"[A-Za-z0-9]", 30, (36,)),
    (r"pypi-", r"[A-Za-z0-9_\-]", 30, ()),
    (r"(?:bearer|basic)\s+", r"[A-Za-z0-9._~+/\-]", 12, None),
]
_PREFIXED_RES = [
    (re.compile(r"(?<![A-Za-z0-9])(?P<prefix>" + prefix + r")(?P<body>" + alpha + r"+)=*(?!" + alpha + r")",
                re.IGNORECASE if "bearer" in prefix else 0), shortest, exact)
    for prefix, alpha, shortest, exact in _PREFIXED
]
# Every prefix above, case folded: a text with none of them holds no prefixed token, and the 12 scans are skipped
# (a necessary condition of each pattern, so nothing is missed: each pattern's match starts with its prefix).
_ANY_PREFIX = re.compile("|".join(prefix for prefix, _a, _s, _e in _PREFIXED), re.IGNORECASE)

# Formats exact enough to need no character test.
_PATTERNS = [
    # AWS access key IDs: a 4-letter type prefix and 16 base32 characters, nothing more.
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
    # JSON Web Tokens: three base64url parts, the first two JSON objects ("eyJ").
    re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
    # Credentials passed as URL query parameters: the context (`?token=`) is the evidence.
    re.compile(r"(?i)(?<=[?&])(?:token|key|api_key|apikey|access_token|secret|password|sig|signature)=[^&\s\"']+"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    # The positional credential of a `login` subcommand (`wandb login <40-character key>`, wandb/cli/cli.py `login
    # [KEY]`; `huggingface-cli login <token>` in old huggingface_hub): the word before it is the evidence.
    re.compile(r"(?<=\blogin )(?!-)[A-Za-z0-9_\-]{20,}(?![A-Za-z0-9_\-])"),
]
# What each of _PATTERNS needs in the text to match (a literal it starts with or looks behind at): a text with none of
# them is not scanned by the five (a necessary condition, so nothing is missed).
_ANY_PATTERN = re.compile(r"AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|eyJ|[?&]|-----BEGIN|\blogin ")
# user:password@host inside URLs: keep the user and host, drop the password. Tried only where a run of scheme
# characters starts (`lead`: the digits, `+`, `.`, `-` before its first letter, kept as they are): the scheme cannot
# hold `:`, so it ends where the run ends, and a match from a later letter of the run would be the same match, found
# after scanning the run again from there: on one long word (64 KiB of letters in an exception name that a report
# repeats in its title, detail and evidence) that was quadratic, ~3 s a string (robust21's audit, 30 s for one
# report); now linear, with the same matches.
_URL_CREDENTIALS = re.compile(r"(?<![A-Za-z0-9+.\-])(?P<lead>[0-9+.\-]*)(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)"
                              r"(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")


def name_is_secret(name: str) -> bool:
    upper = name.upper()
    if upper in _SAFE_NAMES:
        return False
    return any(_SECRET_PART.match(part) for part in re.split(r"[_\-.]", upper) if part)


# A value named by a secret-looking name in the two forms a command line or a shell line gives it, judged as env names
# are (name_is_secret): a flag (`--password=X`, `--hf-token X`), an upper-case assignment (`HF_TOKEN=X cmd`) and a
# snake_case one (`--trainer-arg hub_token=X`). The value is not required to look random: the name is the evidence,
# as for the env section. A one-word lower-case `key=value` (source code, `sorted(x, key=len)`) is left to the value
# patterns.
_NAMED_VALUE = (  # `name=value` in any of the three forms, then `--flag value`: two passes, so that neither hides the other
    re.compile(r"(?<![\w\-])(?P<name>--?[A-Za-z][A-Za-z0-9_\-]*|[A-Z][A-Z0-9_]*|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?P<sep>=)"
               r"(?P<val>(?!<redacted>)[^\s\"'`]+)"),
    re.compile(r"(?<![\w\-])(?P<name>--?[A-Za-z][A-Za-z0-9_\-]*[A-Za-z0-9])(?P<sep>\s+)(?P<val>(?!<redacted>)(?!-)[^\s\"'`=]+)"
               r"(?![\w=])"),
)


def _named(m: "re.Match[str]") -> str:
    name = m["name"]
    if name_is_secret(name.lstrip("-").replace("-", "_")):
        return f"{name}{m['sep']}{REDACTED}"
    return m[0]


# redact_text's answers for the texts it met since the environment last changed (env_secret_values clears it): a report
# repeats most of its strings (keys, titles, fixes: 2,000 LINT044 findings hold 44,072 strings, 4,087 distinct), and
# the answer is a function of the text and the environment only. Bounded: texts up to _MEMO_TEXT_MAX characters, and
# emptied when _MEMO_MAX texts are held.
_MEMO: dict = {}
_MEMO_MAX = 8192
_MEMO_TEXT_MAX = 4096


def redact_text(text: str) -> str:
    """Replace anything in `text` that looks like a credential."""
    if not text:
        return text
    return _memo_text(text, env_secret_values())  # the environment first: a changed one empties _MEMO


def _memo_text(text: str, values: tuple) -> str:
    """redact_text with the environment's secret values already read (`values`, from env_secret_values)."""
    if len(text) > _MEMO_TEXT_MAX:
        return _redact_text(text, values)
    done = _MEMO.get(text)
    if done is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        done = _MEMO[text] = _redact_text(text, values)
    return done


def _redact_text(text: str, values: tuple) -> str:
    for value in values:  # a secret-named variable's value, wherever it is echoed (an exception, argv)
        if value in text:
            text = text.replace(value, REDACTED)
    short = _ENV_SEEN[2]  # read again with the long values by env_secret_values() above
    if short is not None:
        text = short.sub(REDACTED, text)
    out = text
    if "://" in out:
        out = _URL_CREDENTIALS.sub(lambda m: f"{m['lead']}{m['scheme']}{m['user']}:{REDACTED}@", out)
    if "=" in out or "-" in out:
        for pat in _NAMED_VALUE:
            out = pat.sub(_named, out)
    if _ANY_PATTERN.search(out):
        for pat in _PATTERNS:
            out = pat.sub(REDACTED, out)
    if not _ANY_PREFIX.search(out):
        return out
    # Prefixed tokens in one left-to-right pass over every candidate, so a token that contains
    # another prefix (`sk-proj-...-hf_...`) goes whole, while a rejected outer candidate (an
    # identifier) still lets a real token inside it be caught.
    spans = []
    for pat, shortest, exact in _PREFIXED_RES:
        for m in pat.finditer(out):
            spans.append((m.start(), -m.end(), m, shortest, exact))
    spans.sort(key=lambda s: (s[0], s[1]))
    pieces, pos = [], 0
    for start, neg_end, m, shortest, exact in spans:
        if start < pos:
            continue
        repl = _judge(m, shortest, exact)
        if repl is None:
            continue
        pieces += [out[pos:start], repl]
        pos = -neg_end
    return "".join(pieces) + out[pos:]


def _judge(m: "re.Match[str]", shortest: int, exact) -> str | None:
    """The replacement for a candidate token, or None when it is not a credential."""
    core = re.sub(r"[^A-Za-z0-9]", "", m["body"])
    if exact is None:
        secret = len(core) >= shortest and _strict(core)
    elif len(core) in exact or len(m["body"]) in exact:
        secret = sum(any(f(c) for c in core) for f in (str.isupper, str.islower, str.isdigit)) >= 2
    else:
        secret = len(core) >= shortest and _mixed(core)
    if not secret:
        return None
    # Keep the scheme word of an Authorization header; the credential goes.
    return (m["prefix"] if exact is None else "") + REDACTED


def redact_env_value(name: str, value: str) -> str:
    if name_is_secret(name):
        return REDACTED
    return redact_text(value)


def redact_tree(obj: Any, _depth: int = 0) -> Any:
    """Return a copy of a JSON-like tree with every string (keys too) passed through redact_text. The environment's
    secret values are read once for the whole tree (they were read again for each of its strings: a third of the
    time on 10,000 findings)."""
    return _tree(obj, _depth, env_secret_values())


def _tree(obj: Any, depth: int, values: tuple) -> Any:
    if depth > 64:
        return REDACTED
    if isinstance(obj, str):
        return _memo_text(obj, values) if obj else obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = (_memo_text(k, values) if k else k) if isinstance(k, str) else k
            if isinstance(k, str) and isinstance(v, str) and _looks_like_env_name(k) and name_is_secret(k):
                out[key] = REDACTED if v else v
            else:
                out[key] = _tree(v, depth + 1, values)
        return out
    if isinstance(obj, (list, tuple)):
        return [_tree(v, depth + 1, values) for v in obj]
    return obj


_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _looks_like_env_name(name: str) -> bool:
    # Only upper-case env-style keys are treated as secret by name; a JSON key like "tokenizers"
    # in a package list is not a secret.
    return bool(_ENV_NAME.fullmatch(name))


def _env_secret_values(environ: Mapping[str, str]) -> tuple:
    """The values of the variables whose name says secret (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY...), longest
    first: a line that echoes one (a command line, an exception message) hides it even where no pattern knows its form.
    Values under 8 characters are left to the patterns (a flag such as `1` or `true` is no secret)."""
    values = {v for k, v in environ.items() if v and len(v) >= 8 and name_is_secret(k)}
    return tuple(sorted(values, key=len, reverse=True))


# Short values that a secret-named variable holds as a setting, not as a secret.
_NOT_SECRET_VALUES = {"true", "false", "yes", "no", "none", "null", "on", "off", "auto", "default", "unset", "empty"}


def _short_secret_pattern(environ: Mapping[str, str]) -> "Optional[re.Pattern[str]]":
    """The values of 4 to 7 characters of the secret-named variables (a short password, a PIN), as WHOLE tokens only:
    replaced everywhere as substrings they would eat ordinary words and numbers, so a value is hidden only where it
    stands alone (`--pass s3cr3t`, `login failed for s3cr3t`). Settings such as `true` or `auto` are no secret."""
    values = sorted({v for k, v in environ.items()
                     if v and 4 <= len(v) < 8 and name_is_secret(k) and v.lower() not in _NOT_SECRET_VALUES
                     and not v.isspace()}, key=len, reverse=True)
    if not values:
        return None
    return re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(re.escape(v) for v in values) + r")(?![A-Za-z0-9_\-])")


_ENV_SEEN: list = [None, (), None]  # [os.environ's items when last read, their secret values, the short ones' pattern]


def env_secret_values() -> tuple:
    """_env_secret_values of os.environ, read again only when the environment changed (compared in C: every string
    of every output comes here)."""
    data = getattr(os.environ, "_data", None)
    now = tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())
    if now != _ENV_SEEN[0]:
        _ENV_SEEN[:] = [now, _env_secret_values(os.environ), _short_secret_pattern(os.environ)]
        _MEMO.clear()  # redact_text's answers were for the old values
    return _ENV_SEEN[1]


def redact_line(text: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """redact_text, plus the literal values of the secret-named environment variables (this process's by default)."""
    if environ is not None:
        for value in _env_secret_values(environ):
            text = text.replace(value, REDACTED)
        short = _short_secret_pattern(environ)
        if short is not None:
            text = short.sub(REDACTED, text)
    return redact_text(text)


class RedactingWriter:
    """The one writer of the doctor's own stderr lines: every write passes through redact_line before it reaches
    the stream underneath. `ddpdoctor`'s entry point installs it as sys.stderr for the whole command (click's
    `echo(err=True)`, the run supervisor's status lines, the probe's progress, comm's notes all write there), so a
    new message cannot forget to redact. A process the doctor does not own (the user's job, where the run recorder
    writes) calls write_err instead of replacing the job's sys.stderr.

    It has no `buffer`: click would otherwise write around it to the binary stream."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(redact_line(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)


@contextmanager
def redacted_stderr():
    """sys.stderr through RedactingWriter for the block (once: nested blocks keep the outer writer)."""
    if isinstance(sys.stderr, RedactingWriter) or sys.stderr is None:
        yield
        return
    saved = sys.stderr
    sys.stderr = RedactingWriter(saved)
    try:
        yield
    finally:
        if isinstance(sys.stderr, RedactingWriter) and sys.stderr._stream is saved:
            sys.stderr = saved


def write_err(text: str) -> None:
    """One redacted line on this process's stderr, for code running inside a process the doctor does not own."""
    stream = sys.stderr
    if stream is None:
        return
    RedactingWriter(stream).write(text)
    try:
        stream.flush()
    except (OSError, ValueError):
        pass
