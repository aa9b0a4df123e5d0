"""Mine Ascend HCCL's and HCCP's coded errors (CANN error codes EIxxxx and EJxxxx) into message catalogue entries.

CANN's collective library registers the text of every coded error it reports in one JSON table inside
src/common/error_code/error_code.cc (`REG_FORMAT_ERROR_MSG(...)` over an `error_info_list`: ErrCode, errTitle,
ErrMessage with %s fields, and a suggestion). At run time the error manager prints a code as

    EJ0001: [PID: 35532] 2025-08-26-04:05:21.569.071 Failed to initialize the HCCP process. Reason: ...
    [PID: 237] 2026-10-09-08:38:04.978.003 Communication_Error_Ranktable_Detect(EI0015): Failed to collect ...

(the code before the message, or the errTitle with the code in parentheses; torch_npu relays the lines after its
own "ERR02200 DIST call hccl api failed", vLLM-Ascend under its worker prefix). This script reads the table from
one or more copies of error_code.cc and writes one catalogue entry per code, keyed to a class by the code's
meaning (CLASS below). Codes the catalogue already holds with a page of their own (EI0002, EI0006) are left out.

    python tools/mine_hccl_codes.py ERROR_CODE_CC[@COMMIT] ... > entries.json

ERROR_CODE_CC: a copy of the file, e.g. `git show <sha>:src/common/error_code/error_code.cc` in a clone of CANN's
hcomm (the copy read for ddpdoctor/data/messages.json: the public mirror xiaobingling93-pixel/cann-hcomm at
8b0dc7b, which still lists the HCCP codes EJ0001-EJ0004, and at ab56a47, whose newer wording and EI0018-EI0020 are
read too). Nothing is downloaded here. The fixes come from the table's own suggestion and, where it says N/A,
from hicann/hccl's fault-diagnosis pages (docs/en/user_guide/fault_diagnosis/*.md @bf07f6e and @7076f76).
"""
from __future__ import annotations

import json
import re
import sys

REPO = "xiaobingling93-pixel/cann-hcomm"
PATH = "src/common/error_code/error_code.cc"
SKIP = {"EI0002", "EI0006"}   # catalogued in round 17 (torch_npu.hccl.*), with pages of their own

# the class of each code (ddpdoctor/data/messages.json `classes`): a lost peer or a broken link is a consequence of
# another rank's failure (nccl_remote_error, LOG022); everything else HCCL refuses or fails to set up is reported
# with its own meaning and fix (hccl_error, LOG027)
CLASS = {"EI0013": "nccl_remote_error", "EI0018": "nccl_remote_error"}
DEFAULT_CLASS = "hccl_error"

# what each code means for a distributed job, and the fix (the table's suggestion, or hicann/hccl's pages)
MEANING = {
    "EI0001": "an HCCL environment variable has a value HCCL rejects (the message names the variable and the valid "
              "range; HCCL_SOCKET_IFNAME naming a NIC this host or container lacks is the common one)",
    "EI0003": "a collective was called with an argument HCCL rejects (the message names the operator and parameter)",
    "EI0004": "the ranktable file (or a rank in it) is invalid or cannot be parsed",
    "EI0005": "the ranks called a collective with different arguments (operator, count, dtype, or a different "
              "collective altogether): the ranks' scripts, data or versions diverge",
    "EI0007": "HCCL could not allocate a resource (memory or a Notify register): the NPU's resources are exhausted",
    "EI0008": "the ranks run different HCCL (CANN) versions",
    "EI0009": "HCCL could not initialise a transport to a peer device",
    "EI0010": "peer-to-peer communication between NPUs failed",
    "EI0011": "HCCL could not allocate NPU memory for its links (QPs) or buffers: the NPU is out of memory",
    "EI0012": "an SDMA copy of a collective failed: a link fault, a peer that exited first, or a buffer freed or too "
              "small for the operator",
    "EI0013": "an error completion (CQE) on the RoCE link to a peer: the network between the two devices dropped, or "
              "the peer process exited first",
    "EI0014": "the ranktable (or the cluster information negotiated) failed HCCL's checks: it does not match the "
              "devices (IP family, duplicate superDeviceId)",
    "EI0015": "the communicator could not be built from rootInfo: some ranks never connected to the root (rank 0's "
              "host) within HCCL_CONNECT_TIMEOUT (they did not call init, started late, or cannot reach its host NIC)",
    "EI0016": "an HCCL configuration value is invalid or differs between ranks (TLS enabled on some devices only)",
    "EI0017": "a required field is missing from the ranktable file",
    "EI0018": "an error completion (CQE) on the UB link to a peer: the interconnect dropped, or the peer exited first",
    "EI0019": "HCCL could not listen on its host-NIC port (60000-60031 by default): the port is already bound by "
              "another process, often a job still running or another job on the same host",
    "EI0020": "HCCL could not listen on its NPU-NIC port (16666 by default): another process on the same device holds it",
    "EJ0001": "the NPU's communication process (HCCP) could not start: the previous training process still holds the "
              "device",
    "EJ0002": "the NPU's network port is down",
    "EJ0003": "HCCP could not bind its IP port: the port is already bound (a previous or parallel job)",
    "EJ0004": "an IP address HCCP was given is invalid",
}
FIX = {
    "EI0001": "Set the variable the message names to a valid value (HCCL_SOCKET_IFNAME: a NIC `ip addr` lists in "
              "this host or container).",
    "EI0003": "Pass the operator a valid argument (the message gives the expected value).",
    "EI0004": "Fix the ranktable (RANK_TABLE_FILE) so it matches the cluster: device ids, IPs, rank ids.",
    "EI0005": "Make every rank run the same collectives in the same order with the same shapes (same script, "
              "version and number of batches on every rank).",
    "EI0007": "Free NPU resources (fewer processes per NPU, a smaller HCCL_BUFFSIZE) and retry.",
    "EI0008": "Install the same CANN/HCCL version on every node.",
    "EI0009": "Check the device links (`hccn_tool -i <dev> -link -g`) and the peer's log.",
    "EI0010": "Check that the NPUs are healthy (`npu-smi info`); `export HCCL_INTRA_ROCE_ENABLE=1` routes around P2P.",
    "EI0011": "Lower NPU memory use (smaller batch), reduce the RoCE links in use, or lower HCCL_BUFFSIZE.",
    "EI0012": "Check the links and whether a peer exited first (its log); check the collective's buffers.",
    "EI0013": "Read the peer's log (did it exit first?); check the network between the two devices "
              "(`hccn_tool -i <dev> -link -g`).",
    "EI0014": "Correct the ranktable or the devices' configuration (HCCL_SOCKET_FAMILY, HCCL_LOGIC_SUPERPOD_ID).",
    "EI0015": "Find the ranks that never connected (the root's 'connected rankinfo' list) and their logs; set "
              "HCCL_SOCKET_IFNAME to a NIC that reaches rank 0's host; raise HCCL_CONNECT_TIMEOUT (default 120 s) "
              "when ranks only start late.",
    "EI0016": "Make the configuration the same on every device (`hccn_tool -i <dev> -tls -g`).",
    "EI0017": "Add the missing field to the ranktable file.",
    "EI0018": "Read the peer's log (did it exit first?); check the UB interconnect.",
    "EI0019": "Stop the process that holds the port (a job still running), or move HCCL's ports: HCCL_IF_BASE_PORT, "
              "or HCCL_HOST_SOCKET_PORT_RANGE=auto when several processes share an NPU.",
    "EI0020": "export HCCL_NPU_SOCKET_PORT_RANGE=auto   # when several processes share an NPU; else stop the other "
              "process",
    "EJ0001": "Kill the previous training process on that node (`ps aux | grep -E 'python|torchrun'`), wait 10 s, "
              "and start again.",
    "EJ0002": "Bring the NPU's network port up (`hccn_tool -i <dev> -link -g`) or leave that device out.",
    "EJ0003": "Stop the process that holds the port (a previous job), or move the ports (HCCL_IF_BASE_PORT, "
              "HCCL_NPU_SOCKET_PORT_RANGE).",
    "EJ0004": "Correct the IP address (ranktable, HCCL_SOCKET_IFNAME, the device IPs `hccn_tool -i <dev> -ip -g`).",
}


def table(text: str) -> list:
    """The error_info_list of one copy of error_code.cc."""
    start = text.index('R"(') + 3
    return json.loads(text[start:text.index(')"', start)])["error_info_list"]


def _head(message: str) -> str:
    """The message's literal head, up to its first %s field, as a pattern (whitespace loosened)."""
    head = message.split("%s")[0].rstrip(" :[(")
    words = head.split()[:8]
    # a head of four words or more and 24 characters: shorter ones ("Environment variable", "Check ip fail") are
    # words prose uses too; the code itself still matches
    return r"\s*".join(re.escape(w) for w in words) if len(words) >= 4 and len(" ".join(words)) >= 24 else ""


def entries(copies: list) -> list:
    """One entry per code over every copy (newest wording first; older wordings kept as alternatives)."""
    by_code: dict = {}
    for text, commit in copies:
        for row in table(text):
            code = row["ErrCode"].strip()
            if code in SKIP or code not in MEANING:
                continue
            e = by_code.setdefault(code, {"commit": commit, "title": row["errTitle"].strip(), "messages": []})
            if row["ErrMessage"] not in e["messages"]:
                e["messages"].append(row["ErrMessage"])
    # a head two codes share (EI0013's and EI0018's "An error CQE occurred during operator execution") cannot tell
    # them apart: only the code does
    owners: dict = {}
    for code, e in by_code.items():
        for h in {_head(m) for m in e["messages"]} - {""}:
            owners.setdefault(h, set()).add(code)
    out = []
    for code, e in sorted(by_code.items()):
        heads = list(dict.fromkeys(h for h in (_head(m) for m in e["messages"]) if h and len(owners[h]) == 1))
        # the code as the error manager prints it: "EI0015: [PID: ...] ..." or "<errTitle>(EI0015): ..." (a title
        # of any name: releases renamed some, "Bind_Failed(EJ0003)")
        alts = [rf"\b{code}\s*:", rf"\b[A-Z]\w*\s*\(\s*{code}\s*\)"] + heads
        first = e["messages"][0].replace("%s", "x")
        out.append({
            "id": f"hccl.{code.lower()}_{e['title'].lower()}",
            "source": {"repo": REPO, "path": PATH, "commit": e["commit"], "symbol": f"error_info_list {code}"},
            "class": CLASS.get(code, DEFAULT_CLASS),
            "meaning": f"Ascend HCCL/HCCP error code {code} ({e['title']}): {MEANING[code]}.",
            "fix": FIX[code],
            "format": e["messages"][0],
            "pattern": "(?:" + "|".join(alts) + ")",
            "examples": [f"{code}: [PID: 4242] 2025-10-23-17:30:40.098.984 {first}",
                         f"[PID: 4242] 2025-10-23-17:30:40.098.984 {e['title']}({code}): {first}"],
        })
    return out


def main(argv: list) -> int:
    copies = []
    for arg in argv:
        path, _, commit = arg.partition("@")
        with open(path, encoding="utf-8") as fh:
            copies.append((fh.read(), commit))
    json.dump(entries(copies), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
