"""Built-in checks, one folder or module per check-ID prefix (ruff's rule: the code prefix is the
folder): env/ ENV, net NET, nccl NCCL, sys SYS, gpu/ GPU, tok TOK, pkg/ PKG, rt/ RT, comm COMM,
prb PRB, lint LINT000 (the relay of the lint section; the LINT rules live in ddpdoctor/lint/rules/),
doc DOC. The family a check is displayed under is its `family=` label, unchanged by the folder.

Every module here is imported by `ddpdoctor.pipeline.runner.load_all()`. A check is a pure
function of the snapshot; it imports model and facts, never gather, never another family.

This package is also the public API for writing a check (here or in a plugin registered under
the `ddpdoctor.checks` entry-point group):

    from ddpdoctor.checks import check, warning

    @check("SYS099", "my-check", family="system", needs=("host",))
    def my_check(snap):
        '''One line. What it checks / Why it matters / Example / Fix headings follow.'''
        if ...:
            yield warning("title", fix="what to paste", subjects=["host"])

A new fact comes from a gatherer (`ddpdoctor.gather.gatherer`), which declares its fields.
"""
from ddpdoctor.model import ERROR, INFO, WARNING, Finding, error, info, warning
from ddpdoctor.model.registry import check

__all__ = ["check", "Finding", "error", "warning", "info", "ERROR", "WARNING", "INFO"]
