"""Count how NCCL's libfabric plugin (aws-ofi-nccl, 'NET/OFI') uses its WARN level, for the catalogue entry
aws_ofi_nccl.warn_error (ddpdoctor/data/messages.json).

The plugin logs through NCCL's logger with a fixed prefix (include/nccl_ofi_log.h: NCCL_OFI_WARN(fmt) ->
ofi_log_function(NCCL_LOG_WARN, ..., "NET/OFI " fmt)), so NCCL prints it as "host:pid:tid [dev] func:line NCCL WARN
NET/OFI <message>"; its early test programs printed "WARN: Function: %s Line: %d: " before the same message
(tests/test-common.h @5a65a96). The plugin warns before it returns an error to NCCL (src/*: NCCL_OFI_WARN(...); return
-error): a WARN line whose message carries a failure word (failed, failure, error, unable, couldn't, could not, abort,
invalid) is the plugin failing an operation, and NCCL's own trace (" -> 2") follows when the log goes on. This script
lists the WARN formats of a checkout and how many carry such a word, so the entry can be checked against a new release.

    python tools/mine_ofi_warnings.py GIT_DIR [COMMIT]     # e.g. a clone of aws/aws-ofi-nccl

Nothing is downloaded here.
"""
from __future__ import annotations

import re
import subprocess
import sys

FAILURE = re.compile(r"[Ff]ail|[Ee]rror|ERROR|[Uu]nable|[Cc]ouldn'?t|[Cc]ould not|[Aa]bort|[Ii]nvalid")
WARN_CALL = re.compile(r'NCCL_OFI_WARN\(\s*"((?:[^"\\]|\\.)*)"', re.S)


def formats(git_dir: str, commit: str = "HEAD") -> list:
    files = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", "--name-only", commit, "--", "src", "include"],
                           capture_output=True, text=True, check=True).stdout.split()
    out = []
    for f in files:
        if not f.endswith((".c", ".cpp", ".h", ".hpp")):
            continue
        text = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{f}"], capture_output=True, text=True).stdout
        out += [(f, m.group(1)) for m in WARN_CALL.finditer(text)]
    return out


def main(argv: list) -> int:
    git_dir, commit = argv[0], (argv[1] if len(argv) > 1 else "HEAD")
    found = formats(git_dir, commit)
    failing = [fmt for _, fmt in found if FAILURE.search(fmt)]
    print(f"{len(found)} NCCL_OFI_WARN formats at {commit}; {len(failing)} carry a failure word")
    for _, fmt in found:
        if not FAILURE.search(fmt):
            print("  without:", fmt)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
