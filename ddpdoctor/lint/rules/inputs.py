"""LINT090/LINT091: inputs that could not be linted. The engine raises these; the rules only document them."""
from __future__ import annotations

from . import rule


@rule("LINT090", "script-syntax-error", input_rule=True)
def script_syntax_error(t):
    """The script does not parse as Python, so nothing in it was checked.

    What it checks
        Every file given to `ddpdoctor lint` (or `check --script`) parses with Python's own parser.

    Why it matters
        A file that does not parse will not run either, and none of the other rules could look at
        it: a clean lint report would be false comfort. Code pasted from a forum often loses its
        indentation, as the original question's code did.

    Example
        def train(rank):
        os.environ["RANK"] = str(rank)

    Fix
        `python -m py_compile train.py` shows the exact error; fix it and lint again.
    """
    return ()


@rule("LINT091", "script-unreadable", input_rule=True)
def script_unreadable(t):
    """A path that is not lintable Python source: binary, too large, not decodable, unreadable.

    What it checks
        Every file and folder given to `ddpdoctor lint` can be read as Python source text: no NUL
        bytes, under 4 MiB, valid in its declared encoding (UTF-8 by default), readable.

    Why it matters
        The file was skipped and nothing in it was checked; each such path is reported once, with
        the reason, instead of a traceback or a silent pass.

    Example
        ddpdoctor lint model.safetensors

    Fix
        Point the linter at the training script itself (`ddpdoctor lint train.py`), save it as
        UTF-8, or fix the permissions (`chmod +r train.py`).
    """
    return ()
