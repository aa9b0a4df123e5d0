"""Source code shown as text in a log (a thread's pasted script, a PR's diff, a config file): its lines are code, not
events, so none of them is a job's failure line. The blocks are found by the formats' own definitions:

- a Markdown fenced code block (CommonMark 0.31.2, section 4.5 "Fenced code blocks"): an opening fence of three or more
  backticks or tildes, indented at most three spaces, whose info string's first word is the block's language; the block
  ends at a closing fence of the same character, at least as long, with nothing after it but spaces (or at the end of
  the document). A block tagged with a SOURCE language (python, bash/sh, yaml, json, diff, dockerfile, ...) holds code:
  a data or config language's block (yaml, json, diff, toml, dockerfile, ...) until a line of output, a program's (python,
  bash, ...) while its lines are statements (a "```bash" block is often what a terminal printed); one tagged
  text/console/log or untagged holds whatever was pasted, and keeps its failures;
- a unified diff hunk (GNU diffutils manual, "Detailed Description of Unified Format"): a header
  "@@ -FROM[,COUNT] +TO[,COUNT] @@" (COUNT 1 when left out), then COUNT old and COUNT new lines, each marked ' ' (both),
  '-' (old) or '+' (new), and "\\ No newline at end of file"; a copy that lost a context line's leading space gives an
  empty line, which counts as context;
- a pasted script: a shebang line ("#!/bin/bash", "#!/usr/bin/env python") opens it (the kernel's binfmt_script reads
  "#!" then the interpreter), and so does a batch scheduler's directive ("#SBATCH", "#PBS", "#BSUB", "#$ " for SGE:
  Slurm's sbatch, PBS's qsub, LSF's bsub read these comment lines at the top of a job script); it runs to a fence, a
  diff header, or the first line that is output (below) or no shell or Python statement; a "$ " prompt's line is a
  command.

Inside a block of code, a line that is OUTPUT stays an event: a traceback ("Traceback (most recent call last):", its
'File "..."' frames and the exception line after them), an exception line ("RuntimeError: ..." is no Python or shell
statement), a line with a rank, host or time prefix, an NCCL line, a logger's level prefix ("ERROR:", "E1207 ...",
"[E ...]"). The first such line turns the rest of the block into output: a paste that shows code, then what it printed,
in one block.
"""
from __future__ import annotations

import re
from typing import Dict, Optional

# languages whose blocks hold source (GitHub linguist's names and aliases for them)
SOURCE_LANGUAGES = frozenset("""
python py python3 py3 ipython bash sh shell zsh ksh fish yaml yml json jsonc json5 diff patch udiff dockerfile docker
toml ini cfg conf c cpp c++ cxx cc h hpp cuda cu makefile make cmake javascript js typescript ts go rust rs java
""".split())

# data and config languages: their lines are no statements; such a block is code until a line of output shows
DATA_LANGUAGES = frozenset("""
yaml yml json jsonc json5 diff patch udiff dockerfile docker toml ini cfg conf makefile make cmake
""".split())

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`{]*)")
# a program's first output line glued to a fence's opening marker: Python's traceback header, or an exception line
# ("```RuntimeError: ..."), the two lines a traceback module prints first and last (Lib/traceback.py)
_GLUED_OUTPUT = re.compile(r"Traceback \(most recent call last\):|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_DIFF_HEAD = re.compile(r"^(?:diff --git |index [0-9a-f]+\.\.[0-9a-f]+|--- (?:a/|/dev/null)|\+\+\+ (?:b/|/dev/null))")
_SHEBANG = re.compile(r"^#!\s*/\S*(?:bin|env)\S*")
_DIRECTIVE = re.compile(r"^#(?:SBATCH|PBS|BSUB|\$)\s")
# output: a traceback and its frames, an exception line, a logger's or glog's level prefix, a torchrun/elastic record
_OUTPUT = re.compile(
    r"^\s*(?:Traceback \(most recent call|File \"[^\"]+\", line \d+|"
    r"[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)\b:|"
    r"(?:ERROR|WARNING|CRITICAL|FATAL|INFO|DEBUG)[: ]|\[?[EWIF]\d{4} \d\d:\d\d|\[[EWIF] |"
    r"\[(?:rank|RANK|default)\d*\]|\*{3} (?:Aborted|SIG)|srun: |slurmstepd)")
# a statement of a script pasted without a fence (shell or Python): a pasted script is read as code only while its lines
# are statements; any other line (a bare "Killed", "Segmentation fault (core dumped)") ends it and keeps its failures
_STATEMENT = re.compile(
    r"^(?:\s*$|\s+\S|#|\$ |[{}()]|(?:export|set|unset|source|module|cd|if|then|elif|else|fi|for|while|until|do|done|"
    r"case|esac|function|return|exit|trap|echo|printf|local|declare|shift|wait|sleep|srun|sbatch|mpirun|mpiexec|"
    r"torchrun|python\d?(?:\.\d+)?|deepspeed|accelerate|bash|sh|ulimit|nvidia-smi|conda|pip|import|from|def|class|"
    r"try|except|finally|with|raise|assert|print|async|await|elif|pass|break|continue|global|nonlocal)\b|"
    r"@\w|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/|&]?=(?!=)|\()|.*\\$)")


class SourceBlocks:
    """Per input file, where a block of code is open. `code(src, text, output)` says whether this line is code
    (`output`: the line carries a rank, host or time prefix, or is NCCL's: the caller knows from its parse)."""

    def __init__(self) -> None:
        self._fence: Dict[int, tuple] = {}     # src -> (char, length, source?, turned to output?)
        self._hunk: Dict[int, list] = {}       # src -> [old left, new left]
        self._script: Dict[int, bool] = {}     # src -> a pasted script is open

    def code(self, src: int, text: str, output: bool = False) -> bool:
        if "`" in text[:4] or "~" in text[:4]:
            m = _FENCE.match(text)
            if m:
                fence = self._fence.get(src)
                mark = m.group(1)
                if fence is None and mark[0] == "`" and "`" in text[m.end(1):]:
                    # not a fence: "The info string of a backtick fence may not contain backtick characters"
                    # (CommonMark 0.31.2, 4.5): "```AssertionError: The `grad_fn` is needed ...```" is an inline code
                    # span holding a message on one line (round 19, issue 24: b165_06 read as no failure)
                    pass
                elif fence is None:
                    lang = m.group(2).lower()
                    self._fence[src] = (mark[0], len(mark), lang in SOURCE_LANGUAGES, False, lang in DATA_LANGUAGES)
                    self._script.pop(src, None)
                    self._hunk.pop(src, None)
                    # the fence's info string is the text after the marker (CommonMark 0.31.2, 4.5), shown by nobody;
                    # a writer who glued the output's first line to the fence ("```Traceback (most recent call
                    # last):") left that line in the raw text: it is output, not a language (round 19 wave 2, issue 24:
                    # b175_05 read as no failure)
                    return _GLUED_OUTPUT.match(text[m.end(1):].lstrip()) is None
                elif mark[0] == fence[0] and len(mark) >= fence[1] and not text.strip().strip(mark[0]):
                    del self._fence[src]
                    self._script.pop(src, None)
                    self._hunk.pop(src, None)
                    return True
                else:
                    return fence[2] and not fence[3]   # a shorter or other fence inside the block is its content
        hunk = self._hunk.get(src)
        if hunk is not None:
            c = text[:1]
            if c in ("+", "-", " ", "") or text.startswith("\\ "):
                if c != "\\":
                    hunk[0] -= c != "+"
                    hunk[1] -= c != "-"
                if hunk[0] <= 0 and hunk[1] <= 0:
                    del self._hunk[src]
                return True
            del self._hunk[src]
        if text[:2] == "@@":
            m = _HUNK.match(text)
            if m:
                self._hunk[src] = [int(m.group(1) or 1), int(m.group(2) or 1)]
                self._script.pop(src, None)
                return True
        if text[:1] in ("d", "i", "-", "+") and _DIFF_HEAD.match(text):
            return True
        fence = self._fence.get(src)
        if fence is not None and fence[2] and not fence[3]:
            if output or _OUTPUT.match(text) or not (fence[4] or _STATEMENT.match(text)):
                # code, then what it printed, in one block; a shell or Python block is code while its lines are
                # statements ("```bash" is often what a terminal printed: "Segmentation fault (core dumped)")
                self._fence[src] = fence[:3] + (True, fence[4])
                return False
            return True
        if text[:1] == "#" and (_SHEBANG.match(text) or _DIRECTIVE.match(text)):
            self._script[src] = True
            return True
        if text[:2] == "$ ":
            return True   # a shell prompt's command; what it printed follows, unprompted
        if src in self._script:
            if output or _OUTPUT.match(text) or not _STATEMENT.match(text):
                del self._script[src]
                return False
            return True
        return False
