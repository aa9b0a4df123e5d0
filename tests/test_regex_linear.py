"""Round 21: regexes that restarted inside a run their first quantifier consumed were O(n^2) on a long line (one
60 KiB line of spaces holding two " NCCL " words took `triage` 146 s). The guards keep every match the patterns made
before; the cost itself is benchmarks/bench_regex.py's (a ratio measured in one run, never a timed assert here)."""
import os

from ddpdoctor.gather import env as gather_env
from ddpdoctor.lint.rules import ddp_args
from ddpdoctor.model import redact
from ddpdoctor.triage import job, lines, prose
from bench_modules import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    return load("bench_regex")


def test_glued_nccl_split_keeps_its_parts():
    text = ("host1:10:10 [0] NCCL INFO Bootstrap : Using eth0      "
            "host1:11:11 [1] NCCL INFO NET/Socket : Using [0]eth0")
    parts = [p for p in lines._GLUED_NCCL.split(text) if p.strip()]
    assert parts == ["host1:10:10 [0] NCCL INFO Bootstrap : Using eth0", "host1:11:11 [1] NCCL INFO NET/Socket : Using [0]eth0"]
    assert lines._GLUED_NCCL.split("a   b") == ["a   b"]      # spaces before no NCCL line: no split


def test_heading_quote_still_finds_a_quoted_error():
    assert prose._HEADING_QUOTE.search("## Training fails with RuntimeError: NCCL error")
    assert prose._HEADING_QUOTE.search("# xValueError: bad")            # a glued word still counts, from its start
    assert prose._HEADING_QUOTE.search("# _ValueError: bad")
    assert not prose._HEADING_QUOTE.search("# How to train on 2 nodes")


def test_url_credentials_hidden_wherever_the_scheme_starts():
    out = redact.redact_text("see https://bob:hunter2@host/x and xhttps://u:pw1@h and _ftp://a:pw2@c")
    assert "hunter2" not in out and "pw1" not in out and "pw2" not in out
    assert redact.redact_text("a" * 1000 + "://") == "a" * 1000 + "://"


def test_nnodes_from_flag_and_from_the_launch_config():
    def n(t):
        m = job._NNODES.search(t)
        return m and (m.group("flag") or m.group("config"))
    assert n("torchrun --nnodes=2 --nproc-per-node 8 train.py") == "2"
    assert n("  min_nodes        : 3") == "3"
    assert n("[INFO] min_nodes  : 4") == "4"
    assert n("//// min_nodes : 5") == "5"
    assert n("/" * 5000) is None


def test_attr_and_receiver_keep_their_matches():
    assert dict(gather_env._ATTR.findall('<gpu busid="0000:01:00.0" dev ="x">')) == {"busid": "0000:01:00.0", "dev": "x"}
    assert ddp_args._RECEIVER.search("x = self.args").group() == "self.args"
    assert ddp_args._RECEIVER.search("0abc") is None


def test_bench_regex_sees_the_module_patterns_and_how_they_are_called():
    bench = _bench()
    pats = bench.patterns()
    assert len(pats) > 200
    assert "ddpdoctor.triage.lines._GLUED_NCCL" in pats
    assert bench.call_of("ddpdoctor.triage.lines._PDSH") == "match"        # the code only ever matches it
    assert bench.call_of("ddpdoctor.triage.lines._GLUED_NCCL") == "search"  # split restarts everywhere


def test_catalogue_placeholder_before_blanks_ends_on_a_non_blank():
    from ddpdoctor.facts.messages import linear_pattern
    import re
    p = r"nnodes=(?P<nnodes>.*?)\s+is\s+not\s+in"
    q = linear_pattern(p)
    assert q != p
    for text in ["--nnodes=2:x   is not in", "nnodes= is not in", "nnodes=a b  is not in", "x nnodes=3\tis not in y"]:
        a, b = re.search(p, text), re.search(q, text)
        assert a and b and a.span() == b.span() and a.groupdict() == b.groupdict()
    assert re.search(q, "nnodes=" + " " * 5000 + "x") is None


def test_catalogue_pattern_opening_with_a_placeholder_starts_at_the_line_start():
    from ddpdoctor.facts.messages import linear_pattern
    import re
    p = r"(?P<optim>.*?)\s+does\s+not\s+support\s+overlapped\s+DDP"
    q = linear_pattern(p)
    assert q.startswith("(?<![^\\n])")
    for text in ["SGD does not support overlapped DDP", "[rank0]: MyOpt  does not support overlapped DDP.",
                 "  does not support overlapped DDP"]:
        a, b = re.search(p, text), re.search(q, text)
        assert a and b and a.span() == b.span() and a.groupdict() == b.groupdict()
    assert linear_pattern(r"a(?P<g>.*?)b") == r"a(?P<g>.*?)b"           # no blanks after it: unchanged
    assert linear_pattern(r"x\.*?\s+y") == r"x\.*?\s+y"                 # an escaped dot is no placeholder



def test_progress_bars_still_read_after_the_look_behind():
    assert job.is_progress(" 35%|███▌      | 192M/548M [00:04<00:07, 47.2MB/s]")
    assert job.is_progress("Epoch 1:  42%|████▏     | 84/200 [00:10<00:14,  8.1it/s, loss=0.31]")
    assert job.is_progress("100%|██████████")
    assert not job.is_progress("Training Epoch:   0%|          | 0/188 [00:00<?, ?it/s]")
    assert not job.is_progress("0" * 5000 + "%")


def test_a_signature_of_optional_groups_finds_its_field_further_in_without_trying_every_position():
    import re

    from ddpdoctor.triage import signatures
    [rx] = [r for k, _s, r in signatures.SIGNATURES if k == "cuda_oom"]
    heads = signatures._field_heads(rx.pattern)
    assert heads is not None and heads is not False and "Tried to allocate" in heads.pattern
    assert ".*?GPU" not in heads.pattern                      # a group opening with .*? already had its chance at 0
    for text in ["RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 10.76 GiB total capacity)",
                 "x " * 50 + "Tried to allocate 20.00 MiB" + " y" * 50,
                 "nothing here at all"]:
        empty = rx.search(text)
        assert empty.span() == (0, 0)      # the case events() hands on: an empty match at the line's start
        old = next((m for m in rx.finditer(text) if any(v is not None for v in m.groupdict().values())), empty)
        new = signatures._first_with_a_field(rx, text, empty)
        assert (old.span(), old.groupdict()) == (new.span(), new.groupdict()), text
    assert signatures._field_heads(r"^(?:a(?P<x>\d))?") is None          # other shapes keep the old search
    assert signatures._field_heads(r"(?:.*?a(?P<x>\d))?") is False
    assert re.compile(r"(?:x)?")                                          # (the helper compiles nothing it cannot)


def test_a_catalogue_entry_on_a_long_line_is_found_in_its_window():
    from ddpdoctor.facts import messages
    index = messages._index()
    line = "x" * 30000 + " RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:121, " \
           "unhandled system error, NCCL version 2.7.8" + " y" * 5000
    short = line[29990:30200]
    ids_long = {m.entry.get("id") for m in index.match_all(line)}
    ids_short = {m.entry.get("id") for m in index.match_all(short)}
    assert ids_short and ids_short <= ids_long, (ids_short, ids_long)
