"""Name resolution under a deadline, shared by the network gatherer (MASTER_ADDR, this host's own name, the
rendezvous endpoint) and the launch gatherer (the master a deepspeed hostfile implies): a dead DNS server must not
hang the doctor, so getaddrinfo runs in a daemon thread that is abandoned at the deadline."""
from __future__ import annotations

import socket
import threading

RESOLVE_TIMEOUT_S = 2.0


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT_S, canonical: bool = False) -> dict:
    """getaddrinfo(host) under a deadline. With `canonical`, also the canonical name (AI_CANONNAME):
    the FQDN torch's elastic rendezvous compares an endpoint with (`_matches_machine_hostname`)."""
    result: dict = {"host": host}

    def work() -> None:
        try:
            flags = socket.AI_CANONNAME if canonical else 0
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP, flags=flags)
            result["addresses"] = sorted({i[4][0] for i in infos})
            if canonical:
                names = [i[3] for i in infos if i[3]]
                if names:
                    result["canonical"] = names[0]
        except (socket.gaierror, UnicodeError, OSError, ValueError) as exc:
            result["error"] = str(exc)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        result["error"] = f"name resolution did not answer within {timeout:g} s"
    return result
