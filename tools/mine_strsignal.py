"""Refresh ddpdoctor/data/strsignal.json: what a shell prints for a job that died of a signal, in each language.

bash reports a job killed by a signal with the signal's description (jobs.c, pretty_print_job /
notify_of_job_status): glibc's strsignal(sig) (signal/siglist.h, N_("Killed"), N_("Segmentation fault"),
N_("Aborted"), N_("Bus error")) translated through the locale's libc.mo, or bash's own table (siglist.c, the
same msgids in bash.mo) where it has no strsignal; from a script it writes "NAME: line N: PID <description>
<command>" with "line %d: " and "(core dumped)" from bash.mo. Both catalogues are read with Python's gettext
from the compiled .mo files a distribution ships (/usr/share/locale/LL/LC_MESSAGES/{libc,bash}.mo).

    python tools/mine_strsignal.py [LOCALEDIR]     # prints the JSON; review, then write it over the data file
"""
from __future__ import annotations

import gettext
import json
import os
import sys

SIGNALS = {"SIGKILL": "Killed", "SIGSEGV": "Segmentation fault", "SIGABRT": "Aborted", "SIGBUS": "Bus error"}
BASH_TEXTS = {"line": "line %d: ", "core_dumped": "(core dumped)"}


def _catalogue(domain: str, localedir: str, lang: str):
    try:
        return gettext.translation(domain, localedir, languages=[lang])
    except OSError:
        return None


def _table(domain: str, localedir: str, msgid: str, langs) -> dict:
    table = {}
    for lang in langs:
        if not os.path.isfile(os.path.join(localedir, lang, "LC_MESSAGES", domain + ".mo")):
            continue   # gettext would fall back to another language's file (nb_NO -> nb)
        cat = _catalogue(domain, localedir, lang)
        text = cat.gettext(msgid) if cat else msgid
        if text.strip() != msgid.strip():
            table[lang] = text
    return table


def mine(localedir: str = "/usr/share/locale", current: dict = None) -> dict:
    """glibc's strsignal() texts per signal (top level, one string per language), and bash's own (under "bash":
    its siglist.c table, "line %d: " and "(core dumped)"), from the .mo files under LOCALEDIR."""
    out = dict(current or {})
    langs = sorted(os.listdir(localedir))
    for sig, msgid in SIGNALS.items():
        out[sig] = _table("libc", localedir, msgid, langs)
    bash = dict(out.get("bash", {}))
    for sig, msgid in SIGNALS.items():
        bash[sig] = _table("bash", localedir, msgid, langs)
    bash["line"] = _table("bash", localedir, BASH_TEXTS["line"], langs)
    bash["core_dumped"] = {k: v.strip() for k, v in _table("bash", localedir, "(core dumped) ", langs).items()}
    out["bash"] = bash
    return out


if __name__ == "__main__":
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ddpdoctor", "data", "strsignal.json")
    with open(here, encoding="utf-8") as fh:
        cur = json.load(fh)
    json.dump(mine(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/locale", cur), sys.stdout, ensure_ascii=False, indent=1)
