"""Network checks (catalogue C1, C6 static part): will NCCL and Gloo use an interface that exists,
is up, and can reach the other nodes?"""
from __future__ import annotations

import ipaddress
import re
from typing import Optional

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.env import env_int, env_of, nccl_conf_applied
from ddpdoctor.facts.gpu import flag_on
from ddpdoctor.facts.launch import deepspeed_hostfile_of, deepspeed_master, launch_env
from ddpdoctor.facts.launchers import deepspeed_master_rule
from ddpdoctor.facts.units import whole_number


def gloo_ifname_match(spec: str, names: list) -> tuple:
    """GLOO_SOCKET_IFNAME is one or more exact interface names, comma-separated."""
    items = [i.strip() for i in spec.split(",") if i.strip()]
    return [i for i in items if i in names], [i for i in items if i not in names]


def _is_loopback_iface(iface: dict) -> bool:
    if iface.get("name") == "lo":
        return True
    addrs = [a.get("address", "") for a in iface.get("addresses") or []]
    return bool(addrs) and all(_loopback(a) for a in addrs)


def _loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return addr in ("localhost",)


from ddpdoctor.facts.net import VIRTUAL as _VIRTUAL  # noqa: E402 - interfaces never the cluster network by default
from ddpdoctor.facts.net import multi_node, nccl_ib_ports, nccl_ib_wanted  # noqa: E402,F401 - multi_node re-exported
from ddpdoctor.facts.net import span_guessed, span_unknown  # noqa: E402
from ddpdoctor.facts.ranks import master_named_elsewhere_on_loopback  # noqa: E402
from ddpdoctor.facts.net import nccl_ifname_match  # noqa: E402,F401 - re-exported: checks and tests import it here


def _ordered_ifaces(ifaces: list) -> list:
    """Interfaces in the kernel's order (the gathered `order`; by name where it was not recorded)."""
    from ddpdoctor.facts.net import _ordered
    return _ordered(ifaces)


def _has_address(iface: dict) -> bool:
    """An interface NCCL and Gloo can use carries an IPv4 or IPv6 address: NCCL's interface walk skips
    the others (NVIDIA/nccl src/os/linux.cc, findInterfaces: family != AF_INET && != AF_INET6 ->
    continue; commit 5067397c2676d5aed50042fc39e5c8ee96eb0027). A snapshot without the field says nothing."""
    return "addresses" not in iface or bool(iface.get("addresses"))


def sole_cluster_iface(ifaces: list) -> Optional[str]:
    """The one interface that can carry the cluster network (up, not loopback, not virtual, with an
    address), or None when there is none or several of equal merit: a fix must never guess."""
    cands = [i["name"] for i in ifaces if i.get("up") and not _is_loopback_iface(i) and i.get("addresses")
             and not str(i.get("name", "")).startswith(_VIRTUAL)]
    return cands[0] if len(cands) == 1 else None


@check("NET001", "socket-ifname-invalid", reads=("comm",), family="network", needs=("env", "network"), catalogue=("C1",))
def socket_ifname_invalid(snap):
    """NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME select no usable interface on this host.

    What it checks
        The interfaces each variable selects, with NCCL's syntax (comma-separated prefixes; `=`
        for exact names; `^` to exclude) and Gloo's (exact names), against the interfaces that
        really exist here and whether they are up. With several nodes, an interface set that
        leaves only loopback is reported too, and so is a selection whose interfaces carry no IP
        address (a NIC enslaved to a bridge or bond: the address is on br0/bond0). A missing interface the live comm test already
        failed on is left to COMM006, which names the rank and host.

    Why it matters
        NCCL then fails with "Bootstrap : no socket interface found" or hangs in init with "Call
        to connect timeout"; Gloo raises "Unable to find address for: eth9". A stale value copied
        from another cluster is the usual cause; `^docker0` alone can leave only `lo`, which the
        other nodes cannot reach (NVIDIA/nccl#286, horovod/horovod#310, NVIDIA/nccl-tests#9), and when it
        leaves lo beside the NIC, lo comes first in the kernel's order and NCCL bootstraps over it
        (aws/deep-learning-containers#4756). A value from /etc/nccl.conf or ~/.nccl.conf, which NCCL
        applies when the environment does not set the variable, is judged the same way.

    Example
        export NCCL_SOCKET_IFNAME=eth0   # on a host whose NIC is ens5

    Fix
        List the interfaces with `ip -br addr` and name the one that carries the cluster network:
        `export NCCL_SOCKET_IFNAME=ens5 GLOO_SOCKET_IFNAME=ens5`.
    """
    env = env_of(snap)
    ifaces = snap["network"].get("interfaces")
    if not ifaces:
        return
    names = [i["name"] for i in ifaces]
    by_name = {i["name"]: i for i in ifaces}
    listing = ", ".join(f"{i['name']}({'up' if i.get('up') else 'down'})" for i in ifaces)
    spread = multi_node(snap)
    failure = (snap.get("comm") or {}).get("failure")
    # The live comm test failed on this interface: COMM006 names it with the rank and host; once is enough.
    comm_iface = failure.get("iface") if isinstance(failure, dict) and failure.get("kind") == "interface-missing" else None
    suggestion = next((i["name"] for i in ifaces if i.get("up") and not _is_loopback_iface(i)), None)
    sole = sole_cluster_iface(ifaces)
    nccl = env.get("NCCL_SOCKET_IFNAME")
    src = ""
    if nccl is None or not nccl.strip():  # NCCL takes its config files' values for variables the environment lacks
        conf_value, conf_path = nccl_conf_applied(snap)[0].get("NCCL_SOCKET_IFNAME", (None, None))
        if conf_value is not None:
            nccl, src = conf_value, f" (from {conf_path})"
    if nccl is not None and nccl.strip():
        chosen, how = nccl_ifname_match(nccl, names)
        up = [n for n in chosen if by_name[n].get("up")]
        fix = f"export NCCL_SOCKET_IFNAME={'=' + suggestion if suggestion else '<interface>'}   # see `ip -br addr`"
        env_fix = {"NCCL_SOCKET_IFNAME": "=" + sole} if sole else {}
        if not chosen:
            if comm_iface not in how["items"]:  # else COMM006 reports it, with the rank and host
                yield error(f"NCCL_SOCKET_IFNAME={nccl!r}{src} matches no interface on this host",
                            detail=f"NCCL will find no socket interface (bootstrap fails or hangs). Interfaces here: "
                                   f"{listing}.",
                            fix=fix, env_fix=env_fix, subjects=["NCCL_SOCKET_IFNAME"] + [f"iface:{i}" for i in how["items"]],
                            evidence={"NCCL_SOCKET_IFNAME": nccl, "parsed": how, "interfaces": names})
        elif not up:
            yield error(f"NCCL_SOCKET_IFNAME={nccl!r}{src} selects only interfaces that are down: {', '.join(chosen)}",
                        detail=f"NCCL cannot communicate over a down link. Interfaces here: {listing}.",
                        fix=fix, env_fix=env_fix, subjects=["NCCL_SOCKET_IFNAME"] + [f"iface:{n}" for n in chosen],
                        evidence={"NCCL_SOCKET_IFNAME": nccl, "selected": chosen})
        elif not [n for n in up if _has_address(by_name[n])]:
            yield error(f"NCCL_SOCKET_IFNAME={nccl!r}{src} selects only interfaces without an IP address: {', '.join(up)}",
                        detail=f"NCCL skips interfaces that carry no IPv4 or IPv6 address, so it finds no socket "
                               f"interface (bootstrap fails, or the job dies with a network error). An interface "
                               f"enslaved to a bridge or bond carries no address itself: the bridge or bond does. "
                               f"Interfaces here: {listing}.",
                        fix=fix, env_fix=env_fix, subjects=["NCCL_SOCKET_IFNAME"] + [f"iface:{n}" for n in up],
                        evidence={"NCCL_SOCKET_IFNAME": nccl, "selected_without_address": up})
        elif spread and all(_is_loopback_iface(by_name[n]) for n in up):
            yield warning(f"NCCL_SOCKET_IFNAME={nccl!r}{src} leaves only loopback ({', '.join(up)}) for a {spread} job",
                          detail="Other nodes cannot reach this host over loopback: NCCL init will time out.",
                          fix=fix, env_fix=env_fix, subjects=["NCCL_SOCKET_IFNAME"] + [f"iface:{n}" for n in up],
                          evidence={"NCCL_SOCKET_IFNAME": nccl, "selected": up, "why_multi_node": spread})
        elif spread and how["exclude"]:
            walk = [i["name"] for i in _ordered_ifaces(ifaces) if i["name"] in up and _has_address(i)]
            if len(walk) > 1 and _is_loopback_iface(by_name[walk[0]]):
                yield warning(f"NCCL_SOCKET_IFNAME={nccl!r}{src} does not exclude loopback: NCCL will bootstrap over "
                              f"{walk[0]} on a {spread} job",
                              detail=("A '^' list selects every interface it does not name, in the kernel's order, and "
                                      "NCCL's bootstrap takes the first: loopback comes first (NVIDIA/nccl "
                                      "src/misc/socket.cc ncclFindInterfaces takes a user list as given; only NCCL's own "
                                      "default, '^docker,lo,virbr', leaves lo out; commit 5067397c). Other nodes cannot "
                                      f"reach this host over loopback, so init times out. Interfaces here: {listing}."),
                              fix=f"export NCCL_SOCKET_IFNAME=^docker,lo   # or ={walk[1]}, the interface of the cluster network",
                              env_fix={}, subjects=["NCCL_SOCKET_IFNAME", f"iface:{walk[0]}"],
                              evidence={"NCCL_SOCKET_IFNAME": nccl, "source": src.strip(" ()") or "environment",
                                        "selected_in_order": walk, "why_multi_node": spread})
    gloo = env.get("GLOO_SOCKET_IFNAME")
    if gloo is not None and gloo.strip():
        found, missing = gloo_ifname_match(gloo, names)
        fix = f"export GLOO_SOCKET_IFNAME={suggestion or '<interface>'}   # exact name, see `ip -br addr`"
        env_fix = {"GLOO_SOCKET_IFNAME": sole} if sole else {}
        if missing and comm_iface not in missing:
            nccl_syntax = [m for m in missing if m[:1] in ("^", "=")]
            yield error(f"GLOO_SOCKET_IFNAME names {', '.join(missing)}, which does not exist on this host"
                        + (" (Gloo takes exact interface names, not NCCL's ^/= prefixes)" if nccl_syntax else ""),
                        detail=(f"Gloo raises \"Unable to find address for: {missing[0]}\" at init. "
                                + ("GLOO_SOCKET_IFNAME is a comma-separated list of exact names; the ^ (exclude) and "
                                   "= (exact) prefixes are NCCL_SOCKET_IFNAME's syntax only. " if nccl_syntax else "")
                                + f"Interfaces here: {listing}."),
                        fix=fix, env_fix=env_fix, subjects=["GLOO_SOCKET_IFNAME"] + [f"iface:{m}" for m in missing],
                        evidence={"GLOO_SOCKET_IFNAME": gloo, "missing": missing, "interfaces": names})
        down = [n for n in found if not by_name[n].get("up")]
        if down:
            yield error(f"GLOO_SOCKET_IFNAME names {', '.join(down)}, which is down",
                        detail=f"Gloo binds to a down interface and its peers cannot connect. Interfaces here: {listing}.",
                        fix=fix, env_fix=env_fix, subjects=["GLOO_SOCKET_IFNAME"] + [f"iface:{n}" for n in down],
                        evidence={"GLOO_SOCKET_IFNAME": gloo, "down": down})
        elif found and not [n for n in found if _has_address(by_name[n])]:
            yield error(f"GLOO_SOCKET_IFNAME names {', '.join(found)}, which has no IP address",
                        detail=f"Gloo raises \"Unable to find address for: {found[0]}\" at init: it binds to the "
                               f"interface's IPv4 or IPv6 address, and a bridge or bond member has none of its own. "
                               f"Interfaces here: {listing}.",
                        fix=fix, env_fix=env_fix, subjects=["GLOO_SOCKET_IFNAME"] + [f"iface:{n}" for n in found],
                        evidence={"GLOO_SOCKET_IFNAME": gloo, "without_address": found})
        elif spread and found and all(_is_loopback_iface(by_name[n]) for n in found):
            yield warning(f"GLOO_SOCKET_IFNAME={gloo!r} is loopback for a {spread} job",
                          detail="Other nodes cannot reach this host over loopback: the rendezvous will time out.",
                          fix=fix, env_fix=env_fix, subjects=["GLOO_SOCKET_IFNAME"] + [f"iface:{n}" for n in found],
                          evidence={"GLOO_SOCKET_IFNAME": gloo, "why_multi_node": spread})


_TCP_URL = re.compile(r"tcp://[^\s'\"]+")


def _url_error(url: str) -> Optional[str]:
    """urllib's own error for a tcp:// URL whose host is an unbracketed IPv6 literal (what torch's tcp:// rendezvous
    meets at `urlparse(url).port`), or None when the URL parses or its host is not such a literal."""
    from urllib.parse import urlparse  # noqa: PLC0415

    netloc = url[len("tcp://"):].split("/")[0].split("?")[0].rpartition("@")[2]
    if netloc.startswith("[") or netloc.count(":") < 2:
        return None
    try:
        host = netloc.rsplit(":", 1)[0] if not _is_ipv6(netloc) else netloc
        if not _is_ipv6(host):
            return None
        urlparse(url).port
    except ValueError as exc:
        return str(exc)
    return None


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.split("%")[0]).version == 6
    except ValueError:
        return False


def _bracketed(url: str) -> str:
    netloc = url[len("tcp://"):].split("/")[0]
    host, _, port = netloc.rpartition(":") if not _is_ipv6(netloc) else (netloc, "", "")
    return url.replace(netloc, f"[{host}]" + (f":{port}" if port else ""), 1)


def _unbracketed_ipv6_urls(snap) -> list:
    """(where, url, urllib's error) for each tcp:// URL with an unbracketed IPv6 host in the recorded launch commands'
    options (a script's --dist-url / --init-method; the environment gather keeps no variable that holds one)."""
    seen, out = set(), []
    places = []
    for cmd in (((snap.get("launch") or {}).get("commands")) or []) if "launch" in snap else []:
        for field in ("options", "script_options"):
            for k, v in sorted((cmd.get(field) or {}).items()):
                places.append((f"--{k} of {cmd.get('program') or cmd.get('launcher') or 'the command'}", v))
    for where, value in places:
        for url in _TCP_URL.findall(str(value or "")):
            err = _url_error(url)
            if err and url not in seen:
                seen.add(url)
                out.append((where, url, err))
    return out


@check("NET002", "master-addr-unreachable", family="network", needs=("env", "network"), reads=("launch",), catalogue=("C6", "A2"))
def master_addr_unreachable(snap):
    """MASTER_ADDR does not resolve, or is a loopback address in a multi-node job.

    What it checks
        MASTER_ADDR resolves (with a 2-second deadline, so a dead DNS server cannot hang the
        doctor), and is not 127.0.0.1/localhost/::1 when the job spans several nodes. Outside
        torchrun, global rank 0 must run on the host MASTER_ADDR names: it starts the store there.
        An IPv6 MASTER_ADDR: kept in URL brackets ('[fd00::5]'), an error, since env:// hands it to
        TCPStore unchanged as a host name (torch/distributed/rendezvous.py); bare, a note that a
        tcp:// URL built from it needs the brackets urllib's urlparse requires
        (data/launchers.json master_addr_ipv6); and any tcp:// URL with a bare IPv6 host in a
        recorded command's options (a script's --dist-url): an error, urlparse fails.

    Why it matters
        Every rank connects to MASTER_ADDR:MASTER_PORT to rendezvous. An unresolvable name fails
        at once with "Name or service not known" (or "socket.gaierror"); a loopback address on a
        multi-node job makes every node wait for a rank 0 on itself until the timeout
        (NVIDIA/nccl#388, pytorch/pytorch#52848).

    Example
        MASTER_ADDR=localhost with `--nnodes 2`; or a typo'd hostname in the job script.

    Fix
        Use the address of the rank-0 host that all nodes can reach: on SLURM,
        `export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)`.

    Also
        torchrun's c10d rendezvous endpoint (its `--rdzv-endpoint` or PET_RDZV_ENDPOINT) whose host
        does not resolve here: the store client fails with "host not found", unretried
        (pytorch/pytorch#73682; in Kubernetes, a pod name not yet in DNS: meta-pytorch/torchx#541).
        An endpoint given by environment (PET_RDZV_ENDPOINT, the
        `--rdzv-endpoint` torchrun reads from PET_* variables): an empty endpoint is `localhost`
        (parse_rendezvous_endpoint), and a loopback one matches every machine
        (_matches_machine_hostname), so on a job across nodes each node hosts its own store and
        waits for the others there (mlc-ai/pith-train#91: `scontrol ... || echo localhost` in a
        container without scontrol).
        A recorded torchrun command of several nodes that leaves them to the parser's defaults does
        the same: --rdzv-backend c10d with no --rdzv-endpoint (default '', localhost), or the static
        backend with no --master-addr (default 127.0.0.1). And under torchrun, the node that hosts
        the store (node rank 0 of the static rendezvous, or the one node of --nnodes 1) given a
        --master-addr that resolves only to other hosts: its TCPStore(master_addr, ...,
        is_master=True) connects there and times out (static_tcp_rendezvous.py; hiyouga/LlamaFactory#3715).

        Node names that resolve to another network: on a job across nodes, MASTER_ADDR resolves
        only to addresses outside every subnet of this host's interfaces, and this host's own name
        too resolves to an address none of its interfaces has. The cluster's short names then point
        at a network these nodes do not train on (a management network): connections to MASTER_ADDR
        go nowhere, "No route to host" (errno 113), and the names of the training network (another
        domain, or the addresses of its interfaces) must be used (UQ-RCC/hpc-docs#2: `bun003`
        resolving to `bun003.admin`, fixed with the HPC network's FQDN).

        A rank other than 0 of ranks set by hand whose MASTER_ADDR names another host than this one
        but resolves here to loopback only: a guess, since the name may be an alias of this host; if
        rank 0 is elsewhere, the rank connects to its own loopback (pytorch/pytorch#42879: every
        node's name on 127.0.1.1).

        A deepspeed launch with no --master_addr whose first active hostfile host (the one its runner
        ssh-checks and asks `hostname -I`: data/launchers.json deepspeed_master_from_hostfile) does not
        resolve here: "Using hostfile at ... but host=... was not reachable via ssh" before any rank
        starts (volcano-sh/volcano#2952).
    """
    env = launch_env(snap)  # PET_* with a recorded torchrun command over them (facts.launch)
    urls = _unbracketed_ipv6_urls(snap)
    for where, url, err in urls[:4]:
        yield error(f"The tcp:// URL {url} ({where}) names an IPv6 host without brackets: init_process_group cannot "
                    "parse it",
                    detail=(f"A tcp:// init_method is read with urllib's urlparse, which splits an unbracketed host at "
                            f"its first ':'; here it raises \"ValueError: {err}\" before any connection "
                            "(torch/distributed/rendezvous.py _tcp_rendezvous_handler, `result.port`)."),
                    fix=f"{_bracketed(url)}   # or init_method=\"env://\" with MASTER_ADDR set to the bare address",
                    subjects=[f"url:{url}"], evidence={"url": url, "where": where, "error": err})
    yield from _rdzv_endpoint_loopback(snap, env)
    yield from _rdzv_endpoint_unresolved(snap, env)
    addr = env.get("MASTER_ADDR")
    if addr is None:
        yield from _hostfile_master_unresolved(snap)
        return
    res = snap["network"].get("master_addr") or {}
    try:
        literal = ipaddress.ip_address(addr.strip().strip("[]").split("%")[0])
    except ValueError:
        literal = None
    bare = addr.strip().strip("[]")
    if literal is not None and literal.version == 6 and addr.strip().startswith("[") and addr.strip().endswith("]"):
        yield error(f"MASTER_ADDR={addr!r} keeps the brackets of a URL: env:// hands it to TCPStore as a host name, "
                    "which does not resolve",
                    detail=("init_method env:// (the default under every launcher) passes MASTER_ADDR to TCPStore "
                            "unchanged (torch/distributed/rendezvous.py _env_rendezvous_handler); brackets belong "
                            "only inside a URL (tcp://[addr]:port), so the store looks up the name "
                            f"{addr.strip()!r}" + (f" and gets {res['error']!r}" if res.get("error") else "") + "."),
                    fix=f"export MASTER_ADDR={bare}",
                    subjects=["MASTER_ADDR", f"host:{addr}"], evidence={"MASTER_ADDR": addr, "error": res.get("error")})
        return
    if literal is not None and literal.version == 6 and literal.is_link_local and "%" not in addr:
        yield error(f"MASTER_ADDR={addr!r} is a link-local IPv6 address without its interface (%<iface>)",
                    detail=("A link-local address (fe80::/10) exists on every interface, so a socket needs the scope id to "
                            "connect to it; without it connect() fails with EINVAL (errno 22) and no rank reaches the "
                            "store (RFC 4007; pytorch/pytorch#108047)."),
                    fix="export MASTER_ADDR=<the global IPv6 or IPv4 address of rank 0>   # or fe80::...%eth0",
                    subjects=["MASTER_ADDR", f"host:{addr}"], evidence={"MASTER_ADDR": addr})
        return
    if res.get("error"):
        yield error(f"MASTER_ADDR={addr!r} does not resolve: {res['error']}",
                    detail="No rank can connect to the rendezvous; init_process_group fails or waits until its timeout.",
                    fix='export MASTER_ADDR=<resolvable hostname or IP of rank 0>   # check with: getent hosts "$MASTER_ADDR"',
                    subjects=["MASTER_ADDR", f"host:{addr}"], evidence={"MASTER_ADDR": addr, "error": res["error"]})
        return
    if literal is not None and literal.version == 6 and not urls:
        from ddpdoctor.facts.launchers import master_addr_ipv6  # noqa: PLC0415

        port = env.get("MASTER_PORT") or "29500"
        url = f"tcp://{bare}:{port}"
        rest = url[len("tcp://"):].partition(":")[2]
        yield info(f"MASTER_ADDR={addr!r} is an IPv6 address: env:// takes it as it is, but a tcp:// URL built from it "
                   "needs brackets",
                   detail=("torch's env:// rendezvous passes MASTER_ADDR to TCPStore unchanged, so the launchers' "
                           "default works. A script or library that builds init_method=f\"tcp://{MASTER_ADDR}:{port}\" "
                           f"gets {url}, which urllib's urlparse cannot split: init_process_group fails with \""
                           + str(master_addr_ipv6().get("tcp_url_error") or "").replace("{rest}", rest)
                           + "\" before any connection (torch/distributed/rendezvous.py _tcp_rendezvous_handler). "
                           "A guess: check does not see the init_method the script passes."),
                   fix=f'init_method=f"tcp://[{bare}]:{port}"   # or init_method="env://", which needs no brackets',
                   subjects=["MASTER_ADDR", f"host:{addr}"], evidence={"MASTER_ADDR": addr, "guess": True})
    yield from _rank0_not_on_master(snap, addr)
    yield from _names_on_another_network(snap, addr, res)
    spread = multi_node(snap)
    resolved = res.get("addresses") or []
    looped = None if spread else master_named_elsewhere_on_loopback(snap)
    if looped:
        yield warning(f"MASTER_ADDR={addr!r} is not this host's name but resolves to loopback here "
                      f"({', '.join(resolved)}): if rank 0 runs on another machine, this rank connects to itself",
                      detail=(f"Guess: {looped}. Either {addr} is another name of this host (every rank here, and "
                              "nothing is wrong) or this machine's name resolution maps another node to loopback (an "
                              "/etc/hosts copied between nodes, Debian's `127.0.1.1 <hostname>` line): the store "
                              "client then connects to this host's own loopback, where no store listens "
                              "('Connection refused', or a wait until the rendezvous timeout), and Gloo on that node "
                              "advertises the same loopback (pytorch/pytorch#42879)."),
                      fix=(f"getent hosts {addr}   # must print rank 0's routable address on every node; else fix "
                           "/etc/hosts or export MASTER_ADDR=<rank 0's IP>"),
                      subjects=["MASTER_ADDR", f"host:{addr}"],
                      evidence={"MASTER_ADDR": addr, "resolved": resolved, "guess": True})
    if spread and (addr.strip().lower() == "localhost" or (resolved and all(_loopback(a) for a in resolved))):
        from ddpdoctor.facts.net import hosts_counted

        hosts = hosts_counted(snap)
        # torchrun's figures count launch agents, not hosts: several agents may share this host on purpose
        # (torchrun --nnodes 2 twice on one machine, torchx's local scheduler), and then loopback is right
        make = error if hosts else warning
        yield make(f"MASTER_ADDR={addr!r} is a loopback address but the job spans {spread}",
                   detail="Each node would look for rank 0 on itself; the nodes never meet and init times out."
                          + ("" if hosts else " (The figures count launch agents, not hosts: if every agent runs on "
                             "this host, loopback is right, and GPU016 says whether the agents share GPUs.)"),
                   fix='export MASTER_ADDR=<address of the rank-0 host reachable from every node>',
                   subjects=["MASTER_ADDR", f"host:{addr}"],
                   evidence={"MASTER_ADDR": addr, "resolved": resolved, "why_multi_node": spread,
                             "hosts_from_scheduler": hosts})


def _hostfile_master_unresolved(snap):
    """A deepspeed launch with no --master_addr whose first active hostfile host, the one its runner ssh-checks and
    takes as the master (data/launchers.json deepspeed_master_from_hostfile), does not resolve on this host."""
    ds = deepspeed_master(snap)
    res = (ds or {}).get("resolved")
    if not ds or not isinstance(res, dict) or ds["host"] in ("localhost", "127.0.0.1"):
        return
    if env_of(snap).get("RANK") is not None or env_of(snap).get("LOCAL_RANK") is not None:
        return  # a rank that launch started: its runner got past the ssh check (on the node it ran on)
    if res.get("addresses") and not res.get("error"):
        return
    host, path = ds["host"], ds.get("hostfile") or "the hostfile"
    rule = deepspeed_master_rule()
    src = rule.get("source") or {}
    why = res.get("error") or "no address"
    timed_out = "did not answer" in why
    make = warning if timed_out or not res.get("error") else error
    said = str(rule.get("ssh_check_error") or "").replace("{hostfile}", path).replace("{first_host}", host)
    yield make(f"DeepSpeed's first hostfile host {host!r} does not resolve here ({why}): its runner cannot reach it "
               "over ssh and no rank starts",
               detail=(f"deepspeed read {path} and has no --master_addr: its runner ssh-checks the first active host "
                       f"and asks it `hostname -I` for the master address ({src.get('repo')} {src.get('path')} @ "
                       f"{str(src.get('commit'))[:8]}, main()). ssh cannot resolve {host} either ('Could not resolve "
                       f"hostname'), so the launch stops with \"{said}\" even when the keys are right "
                       "(volcano-sh/volcano#2952: pod DNS names in /etc/hostfile without a Service). Only the first "
                       "host is resolved here; pdsh reaches every other host by its name too."),
               fix=(f"getent hosts {host}   # must print an address on this host: add the names to DNS or /etc/hosts "
                    "(Kubernetes: a headless Service for the pods; Volcano: the svc plugin), or write the hosts' "
                    f"IP addresses into {path}"),
               subjects=[f"host:{host}", f"path:{path}", "pkg:deepspeed"],
               evidence={"first_host": host, "hostfile": path, "resolution": res})


def _names_on_another_network(snap, addr: str, res: dict):
    """MASTER_ADDR resolves outside every subnet of this host and this host's own name resolves to an address no
    interface has: the cluster's names point at a network this node is not on (UQ-RCC/hpc-docs#2). Needs the
    netmasks (else subnets are guesses) and both signals: a routed fabric puts MASTER_ADDR on another subnet, but
    then this host's own name resolves to an address of its own."""
    from ddpdoctor.facts import net as netfacts

    spread = multi_node(snap)
    if not spread:
        return
    net = snap["network"]
    ifaces = [i for i in net.get("interfaces") or [] if isinstance(i, dict) and i.get("up") is not False
              and not _is_loopback_iface(i)]
    nets = [(a, m) for i in ifaces for a, m in netfacts.v4(i)]
    if not nets or any(not m for _, m in nets):
        return

    def routable_v4(addrs):
        out = []
        for a in addrs or []:
            try:
                ip = ipaddress.ip_address(str(a))
            except ValueError:
                continue
            if ip.version == 4 and not ip.is_loopback and not ip.is_link_local:
                out.append(str(ip))
        return out

    master = routable_v4(res.get("addresses"))
    if not master or any(netfacts.same_subnet(i, a) for i in ifaces for a in master):
        return
    own = net.get("own_hostname") or {}
    mine = {a for a, _ in nets}
    foreign = [a for a in routable_v4(own.get("addresses")) if a not in mine]
    if not foreign or not own.get("host"):
        return
    local_nets = sorted({str(netfacts.network_of(a, m)) for a, m in nets})
    yield warning(f"MASTER_ADDR={addr!r} resolves to {', '.join(master)}, on none of this host's networks "
                  f"({', '.join(local_nets)}), and this host's own name {own.get('host')!r} resolves to "
                  f"{', '.join(foreign)}, which no interface here has: the node names point at another network",
                  detail=(f"The job spans {spread}. The short node names resolve to a network this host does not "
                          "train on (a management or admin network, as /etc/hosts or DNS lists them first), so the "
                          "ranks' connections to MASTER_ADDR take no route there and fail with 'No route to host' "
                          "(errno 113) or time out (UQ-RCC/hpc-docs#2: bun003 resolving to bun003.admin, fixed by "
                          "the FQDN of the HPC network)."),
                  fix=("export MASTER_ADDR=<rank-0 host's name or address on the training network>   # e.g. its "
                       f"address in {local_nets[0]}; check with: getent hosts \"$MASTER_ADDR\""),
                  subjects=["MASTER_ADDR", f"host:{addr}"],
                  evidence={"MASTER_ADDR": addr, "resolved": master, "own_hostname": own.get("host"),
                            "own_resolved": foreign, "local_networks": local_nets, "why_multi_node": spread})


def _pet_nnodes_max(env) -> Optional[int]:
    """torchrun's --nnodes from PET_NNODES: `N` or `MIN:MAX`, the maximum."""
    raw = str(env.get("PET_NNODES") or "").strip()
    try:
        return int(raw.rsplit(":", 1)[-1]) if raw else None
    except ValueError:
        return None


def _rdzv_endpoint_unresolved(snap, env):
    """The host of torchrun's c10d rendezvous endpoint (its --rdzv-endpoint, or PET_RDZV_ENDPOINT; resolved by the
    network gatherer as network.rdzv_endpoint) does not resolve here: every agent's TCPStore client fails at once
    with "host not found: Name or service not known" (c10d_rendezvous_backend.py _create_tcp_store; the lookup is not
    retried, pytorch/pytorch#73682). In a Kubernetes pod the name of rank 0's pod may not exist yet when the workers
    start (meta-pytorch/torchx#541)."""
    backend = str(env.get("PET_RDZV_BACKEND") or "").strip().lower()
    endpoint = (snap["network"].get("rdzv_endpoint") or {}) if "network" in snap else {}
    host = str(endpoint.get("host") or "").strip()
    if backend != "c10d" or not host or not endpoint.get("error") or endpoint.get("addresses"):
        return
    pod = str((snap.get("host") or {}).get("container") or "") == "kubernetes"
    yield error(f"torchrun's rendezvous endpoint host {host!r} does not resolve: {endpoint['error']}",
                detail=("Every agent connects to the rendezvous store there and fails at once with \"host not found: "
                        "Name or service not known\"; torch does not retry the lookup."
                        + (" In a Kubernetes pod the name of rank 0's pod or service may not exist yet when this pod "
                           "starts: wait for it before torchrun (an init container that loops on nslookup)." if pod
                           else "")),
                fix=(f'until getent hosts {host}; do sleep 2; done   # before torchrun, in each pod' if pod else
                     "torchrun --rdzv-endpoint <resolvable host of the first node>:29400 ...   # check with: getent hosts "
                     + host),
                subjects=["PET_RDZV_ENDPOINT", f"host:{host}"],
                evidence={"rdzv_endpoint": endpoint, "kubernetes": pod})


def _rdzv_endpoint_loopback(snap, env):
    """The c10d rendezvous endpoint torchrun takes from PET_RDZV_ENDPOINT is loopback (or empty, which
    parse_rendezvous_endpoint reads as localhost) on a job across nodes. `_matches_machine_hostname` takes
    localhost and any loopback address as this machine, so every node's agent starts its own TCPStore and
    waits there for the others (pytorch/pytorch torch/distributed/elastic/rendezvous/utils.py at 01283177;
    c10d_rendezvous_backend.py `_create_tcp_store`). The static backend uses MASTER_ADDR, judged above."""
    from ddpdoctor.facts.launch import command_of

    backend = str(env.get("PET_RDZV_BACKEND") or "").strip().lower()
    cmd = command_of(snap, "torchrun")
    opts = (cmd or {}).get("options") or {}
    if backend == "static" and cmd and not opts.get("master_addr") and not env_of(snap).get("PET_MASTER_ADDR"):
        # a recorded torchrun command with no --master-addr: its static rendezvous uses the parser's default,
        # 127.0.0.1 (torch/distributed/run.py --master-addr default), on every node
        yield from _static_master_default_loopback(snap, env)
        return
    if backend != "c10d" or ("PET_RDZV_ENDPOINT" not in env and not cmd):
        return  # an endpoint a recorded command does not give is torchrun's default, '' (localhost)
    raw = str(env.get("PET_RDZV_ENDPOINT") or "").strip()
    host = "localhost"
    if raw:
        host = raw[1:raw.index("]")] if raw.startswith("[") and "]" in raw else raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw
    if not _loopback(host.lower()):
        return
    nn = _pet_nnodes_max(env)
    spread = f"{nn} nodes (PET_NNODES={env.get('PET_NNODES')})" if nn and nn > 1 else multi_node(snap)
    if not spread:
        return
    from ddpdoctor.facts.net import hosts_counted

    hosts = hosts_counted(snap)
    make = error if hosts and hosts > 1 else warning
    given = ("PET_RDZV_ENDPOINT=" + repr(raw) if "PET_RDZV_ENDPOINT" in env_of(snap) else
             f"--rdzv-endpoint {raw}" if raw else "(--rdzv-endpoint not given: torchrun's default '', localhost)")
    yield make(f"torchrun's rendezvous endpoint {given} is loopback but the job spans {spread}",
               detail=("torch reads an empty endpoint as localhost, and takes localhost or a loopback address as this "
                       "machine, so the agent of every node starts its own rendezvous store and waits there for the "
                       "others: the nodes never meet and the job hangs until the rendezvous timeout."
                       + ("" if hosts else " (The figures count launch agents, not hosts: if every agent runs on this "
                                           "host, loopback is right.)")),
               fix=('export PET_RDZV_ENDPOINT=<host of the first node>:29500   # the same on every node; on SLURM: '
                    '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1), failing loudly if scontrol is missing'),
               subjects=["PET_RDZV_ENDPOINT"],
               evidence={"PET_RDZV_ENDPOINT": raw, "host": host, "why_multi_node": spread, "hosts_from_scheduler": hosts})


def _static_master_default_loopback(snap, env):
    """torchrun --nnodes N>1 with the static rendezvous and no --master-addr: every node's agent takes the default
    127.0.0.1 as the store's host (torch/distributed/run.py: --master-addr default "127.0.0.1"; static_tcp_rendezvous
    connects to it), so the nodes other than node rank 0 look for the store on themselves."""
    nn = _pet_nnodes_max(env)
    if not nn or nn < 2 or env_of(snap).get("MASTER_ADDR"):
        return  # a worker's MASTER_ADDR (torchrun's own) is judged by the loopback arm of NET002
    from ddpdoctor.facts.net import hosts_counted

    hosts = hosts_counted(snap)
    make = error if hosts and hosts > 1 else warning
    yield make(f"torchrun --nnodes {env.get('PET_NNODES')} without --master-addr: every node looks for the rendezvous "
               "store at the default 127.0.0.1",
               detail=("torchrun's static rendezvous (its default backend) takes its store's address from --master-addr, "
                       "whose default is 127.0.0.1: node rank 0 starts the store on itself and every other node "
                       "connects to its own loopback, finds nothing and times out."
                       + ("" if hosts else " (The figures count launch agents, not hosts: if every agent runs on this "
                                           "host, loopback is right.)")),
               fix=("torchrun --nnodes N --node-rank R --master-addr <host of node rank 0> --master-port 29500 ...   "
                    "# or --rdzv-backend c10d --rdzv-endpoint <host:port> on every node"),
               subjects=["arg:master_addr", "MASTER_ADDR"],
               evidence={"nnodes": env.get("PET_NNODES"), "master_addr": "127.0.0.1 (default)",
                         "hosts_from_scheduler": hosts})


def _rank0_not_on_master(snap, addr: str):
    """Global rank 0 runs here but MASTER_ADDR resolves only to another host's addresses. Outside torchelastic,
    init_process_group's env:// rendezvous starts the TCPStore server in rank 0 (`start_daemon = rank == 0`, listening
    on MASTER_PORT of rank 0's own host) and every rank, rank 0 too, connects to MASTER_ADDR:MASTER_PORT
    (pytorch/pytorch torch/distributed/rendezvous.py _create_c10d_store, read at 2.13.0 cf30153c4c13): the
    clients find no store there and all time out (pytorch/pytorch#46800, a scheduler that placed rank 0 on the
    other node). Under torchrun the agent's store serves the workers (TORCHELASTIC_USE_AGENT_STORE), so it is not
    judged there."""
    from ddpdoctor.facts.net import master_elsewhere

    launcher = snap.get("launcher") or {}
    env = env_of(snap)
    if launcher.get("kind") == "torchrun":
        yield from _store_node_not_on_master(snap, addr)
        return
    if launcher.get("elastic_run_id") or launcher.get("kind") in ("torchrun", "accelerate") \
            or str(env.get("TORCHELASTIC_USE_AGENT_STORE", "")).lower() == "true":
        return
    if launcher.get("rank") != 0 or (launcher.get("world_size") or 0) < 2:
        return
    other = master_elsewhere(snap)
    if not other:
        return
    yield error(f"RANK=0 runs on this host but MASTER_ADDR={addr!r} ({other}) is another host: no rank will find the store",
                detail=("Rank 0 starts the rendezvous store (TCPStore) on its own host, at MASTER_PORT, and every rank "
                        "connects to MASTER_ADDR:MASTER_PORT. With MASTER_ADDR naming another host, the clients reach a "
                        "host without a store and init_process_group times out on every rank (torch/distributed/"
                        "rendezvous.py, _create_c10d_store: start_daemon = rank == 0; pytorch/pytorch#46800)."),
                fix=("export MASTER_ADDR=<this host's address>   # the host of RANK=0; or start RANK=0 on the host "
                     "MASTER_ADDR names (first host of the job's node list)"),
                subjects=["MASTER_ADDR", "RANK", f"host:{addr}"],
                evidence={"MASTER_ADDR": addr, "resolved": other, "rank": 0, "launcher": launcher.get("kind")})


def _store_node_not_on_master(snap, addr: str):
    """Under torchrun, the node that must host the rendezvous store names another host as MASTER_ADDR. torchrun's
    default rendezvous is `static` (torch/distributed/run.py: --rdzv-backend default "static", its endpoint
    --master-addr:--master-port, its rank --node-rank): StaticTCPRendezvous.next_rendezvous creates
    TCPStore(master_addr, master_port, is_master=rank == 0), "the listener on the agent with group_rank=0", whose own
    client then connects to master_addr (pytorch/pytorch torch/distributed/elastic/rendezvous/
    static_tcp_rendezvous.py @109673f9). So node rank 0 of a static rendezvous, and the one node of a job of one node,
    must be the host MASTER_ADDR names; when it resolves only to other hosts' addresses the connect times out
    ("The client socket has failed to connect to ...:29500 (errno: 110 - Connection timed out)",
    hiyouga/LlamaFactory#3715). --standalone rendezvous on localhost and is not judged; a recorded torchrun command
    is needed (its backend and node count)."""
    from ddpdoctor.facts.launch import command_of
    from ddpdoctor.facts.net import master_elsewhere

    cmd = command_of(snap, "torchrun")
    if not cmd:
        return
    opts = cmd.get("options") or {}
    if opts.get("standalone"):
        return
    launcher = snap.get("launcher") or {}
    # torchrun reads --master-addr (PET_MASTER_ADDR), never the shell's MASTER_ADDR: judge the address it was given,
    # or the one it handed its workers (this process is one: TORCHELASTIC_RUN_ID)
    given = str(opts.get("master_addr") or "").strip()
    if given != addr.strip() if given else not launcher.get("elastic_run_id"):
        return
    backend = str(opts.get("rdzv_backend") or "static").strip().lower()
    nnodes = str(opts.get("nnodes") or "1").strip()
    one_node = nnodes in ("1", "1:1")
    node_rank = launcher.get("node_rank")
    if node_rank is None:
        raw = str(opts.get("node_rank") or "0").strip()  # the parser's default is 0 (run.py --node-rank)
        node_rank = int(raw) if raw.isdigit() else None
    static_master = backend == "static" and node_rank == 0
    if not (one_node or static_master):
        return
    other = master_elsewhere(snap)
    if not other:
        return
    why = (f"a job of one node (--nnodes {nnodes})" if one_node else
           "node rank 0 of torchrun's static rendezvous")
    yield error(f"MASTER_ADDR={addr!r} ({other}) is another host, but this node hosts the rendezvous store: {why}",
                detail=("torchrun's static rendezvous (its default when --master-addr/--master-port are given) starts "
                        "the store on the agent of node rank 0 and connects to it at MASTER_ADDR:MASTER_PORT "
                        "(TCPStore(master_addr, master_port, is_master=rank == 0), torch/distributed/elastic/rendezvous/"
                        "static_tcp_rendezvous.py); on a job of one node every rank runs here. With MASTER_ADDR naming "
                        "another machine the connection goes there and times out: \"The client socket has failed to "
                        "connect to ...:MASTER_PORT (errno: 110 - Connection timed out)\"."),
                fix=("torchrun --standalone --nproc-per-node N train.py   # one node; or --master-addr <this host's "
                     "address> (127.0.0.1 on one node)"),
                subjects=["MASTER_ADDR", f"host:{addr}"],
                evidence={"MASTER_ADDR": addr, "resolved": other, "rdzv_backend": backend, "nnodes": nnodes,
                          "node_rank": node_rank})


def _link_local_only(iface: dict, netfacts) -> bool:
    addrs = [a for a, _ in netfacts.v4(iface)] + netfacts.v6(iface)
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_link_local for a in addrs)


def _routable(iface: dict, netfacts) -> bool:
    """An interface with an address other hosts can route to: an IPv4 or IPv6 one that is not link-local."""
    addrs = [a for a, _ in netfacts.v4(iface)] + netfacts.v6(iface)
    return any(not ipaddress.ip_address(a.split("%")[0]).is_link_local for a in addrs)


def _serving_host_ip_pick(snap, env, netfacts):
    """An inference server (vLLM, SGLang) that picks the address it publishes by itself (data/serving.json
    engines[].host_ip: its override variable unset, the default route's source address) on a host with several
    routable addresses: spread over nodes, any one the cluster does not use may be the pick; on one node, a VPN
    tunnel's address (host_ip_tunnels) may be."""
    from ddpdoctor.facts.launch import serving_host_ip, tunnel_interface

    ifaces = [i for i in (snap.get("network") or {}).get("interfaces") or [] if isinstance(i, dict)]
    for srv, rule in serving_host_ip(snap):
        if any((env.get(v) or "").strip() for v in rule.get("env") or []):
            continue
        cands = []
        for i in netfacts._ordered(ifaces):
            if i.get("up") is False or _is_loopback_iface(i) or \
                    (netfacts.is_virtual(i) and not tunnel_interface(i)):
                continue
            for a, _m in netfacts.v4(i):
                ip = ipaddress.ip_address(a)
                if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
                    cands.append((i, a))
        if len({a for _i, a in cands}) < 2:
            continue
        engine = srv.get("engine")
        var = (rule.get("env") or ["HOST_IP"])[0]
        nodes = srv.get("nodes")
        spread = bool(srv.get("multi_node")) or (isinstance(nodes, int) and nodes > 1)
        named = set()
        for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            for part in (env.get(key) or "").lstrip("=^").split(","):
                if part.strip():
                    named.add(part.strip())
        master = (env.get("MASTER_ADDR") or "").strip()
        meant = [(i, a) for i, a in cands if i["name"] in named or a == master]
        listing = ", ".join(f"{i['name']} {a}" + (" (tunnel)" if tunnel_interface(i) else "") for i, a in cands)
        # the default route's interface, when the gatherer read it (/proc/net/route): the engine's pick is known
        route = str(((snap.get("network") or {}).get("default_route") or {}).get("iface") or "")
        picked = [(i, a) for i, a in cands if i["name"] == route][:1] if route else []
        if route and not picked:
            continue  # the default route leaves by an interface without a routable address here: not this class
        if spread:
            others = [(i, a) for i, a in cands if (i, a) not in meant] if meant else cands
            if picked:
                if not meant or picked[0] in meant:
                    continue  # the engine's pick is the cluster's interface (or nothing says which one is)
                others = picked
            if not others:
                continue
            want = meant[0][1] if meant else "<this node's address on the cluster network>"
            said = (f"the cluster's interface is {meant[0][0]['name']} ({want}, "
                    f"{'NCCL/GLOO_SOCKET_IFNAME' if meant[0][0]['name'] in named else 'MASTER_ADDR'}), but "
                    if meant else "")
            yield warning(f"{engine} spans several nodes and {var} is unset: it advertises the default route's address, "
                          f"which here {'is' if picked else 'may be'} {', '.join(a for _i, a in others)} ({', '.join(i['name'] for i, _a in others)})",
                          detail=f"{engine} picks the address it publishes to its other nodes by itself ({rule['rule']}) "
                                 f"This host has several routable addresses: {listing}; {said}the engine does not read "
                                 "NCCL_SOCKET_IFNAME. When the default route goes through another interface, the other "
                                 "nodes are told an address they cannot reach (or one the cluster's scheduler, e.g. "
                                 "Ray, does not know), and the engine waits forever after NCCL's init or for its "
                                 "placement group. "
                                 + (f"The default route leaves by {route} (/proc/net/route): that is the engine's pick."
                                    if picked else "Whether the default route goes there was not recorded: a guess "
                                                   "from the interfaces."),
                          fix=f"export {var}={want}   # on every node, its own address on the cluster network"
                              + ("; start Ray with `ray start --node-ip-address=$" + var + "`" if engine == "vllm" else ""),
                          subjects=[var] + [f"iface:{i['name']}" for i, _a in others],
                          evidence={"engine": engine, "addresses": [[i["name"], a] for i, a in cands],
                                    "cluster": [[i["name"], a] for i, a in meant], "override": rule.get("env")})
            continue
        tunnels = [(i, a) for i, a in cands if tunnel_interface(i)]
        if picked:
            tunnels = [t for t in tunnels if t == picked[0]]
        if not tunnels:
            continue
        yield warning(f"{engine} picks its rendezvous address from the default route and {var} is unset: with the "
                      f"tunnel {tunnels[0][0]['name']} ({tunnels[0][1]}) up, that {'is' if picked else 'may be'} the tunnel's "
                      f"address",
                      detail=f"{engine}: {rule['rule']} A VPN that carries the default route makes that the tunnel's "
                             f"address (a /32 or a tunnel device), and the torch.distributed rendezvous "
                             f"(tcp://{tunnels[0][1]}:<port>) can time out there: 'The server socket on "
                             f"[::ffff:{tunnels[0][1]}]:<port> has timed out, will retry.' Interfaces: {listing}. "
                             + (f"The default route leaves by {route} (/proc/net/route)." if picked else
                                "Whether the VPN holds the default route was not recorded: a guess from the interfaces."),
                      fix=f"export {var}=127.0.0.1   # one node; on several, this node's LAN address (or leave the VPN)",
                      subjects=[var, f"iface:{tunnels[0][0]['name']}"],
                      evidence={"engine": engine, "tunnels": [[i["name"], a] for i, a in tunnels],
                                "addresses": [[i["name"], a] for i, a in cands], "override": rule.get("env")})


@check("NET003", "nccl-default-interface-unreachable", family="network", needs=("env", "network"), reads=("host",),
       catalogue=("C1",))
def nccl_default_interface_unreachable(snap):
    """With NCCL_SOCKET_IFNAME unset, NCCL will pick an interface the other hosts cannot reach.

    What it checks
        In a job that spans several hosts (or names a remote NCCL_COMM_ID), the interface NCCL's own
        default picks (src/misc/socket.cc: ib* first, then one in NCCL_COMM_ID's subnet, then anything
        but docker*, lo and virbr*, in the kernel's order; NCCL before 2.28.3 did not leave virbr* out):
        a virtual one (veth*, br-*, cni*, libvirt's virbr* under an older NCCL, an interface whose only
        addresses are link-local, IPv6 fe80:: ones included: NCCL keeps those after every IPv4 one)
        while a real NIC is up (one with a routable IPv4 or IPv6 address; in a container whose only
        way out is a veth, an interface NCCL picks whose addresses are all link-local: an IPv6-only
        host with an ip6tnl0 tunnel ahead of veth0, NVIDIA/nccl#529); or, inside a container, a
        private bridge address in another subnet than the rendezvous host (not in a Kubernetes pod,
        whose pod network routes between the nodes' pod subnets without NAT).
        Also, from the rendezvous address (MASTER_ADDR, resolved or literal) with NCCL_COMM_ID unset:
        NCCL's bootstrap takes ONE interface, the first of that order (src/bootstrap.cc,
        ncclFindInterfaces(..., 1); data/nccl_bootstrap.json), and publishes its own address. A real
        NIC picked outside the rendezvous' network while another NIC is in it (or holds it) is the
        troubleshooting guide's "UP but not able to communicate between nodes" (an ib* pick only with
        NCCL_IB_DISABLE / NCCL_NET=Socket: otherwise IPoIB on the job's fabric is NCCL's design); a
        private bootstrap address while the rendezvous is a public one (and no NIC in its network) is
        NAT: the peers cannot connect back.
        Also an inference server that picks the address it publishes by itself (vLLM's get_ip(),
        SGLang's get_local_ip_auto(): VLLM_HOST_IP / SGLANG_HOST_IP unset, the default route's
        source address; data/serving.json engines[].host_ip) on a host with several routable
        addresses: spread over nodes, one the cluster's NCCL/GLOO_SOCKET_IFNAME does not name may be
        the pick (Wi-Fi beside a ConnectX link, Ethernet beside IB); on one node, a VPN tunnel's.

    Why it matters
        NCCL advertises that address to the other ranks; they cannot connect back to it, and
        ncclCommInitRank hangs or fails with "No interface found in the same subnet as remote
        address" / "Call to connect timeout". Nothing is misconfigured by hand, which makes it hard
        to see (NVIDIA/nccl#913: a veth left by a bridge-mode container).

    Example
        A host with veth3f2a9b1 (169.254.12.7) and enp65s0f0 (10.0.0.5), no NCCL_SOCKET_IFNAME, 2 nodes.

    Fix
        export NCCL_SOCKET_IFNAME==enp65s0f0 GLOO_SOCKET_IFNAME=enp65s0f0   # the NIC of the cluster
        network; in docker, run with --network=host
    """
    from ddpdoctor.facts import net as netfacts

    env = env_of(snap)
    yield from _serving_host_ip_pick(snap, env, netfacts)
    if (env.get("NCCL_SOCKET_IFNAME") or "").strip():
        return
    ifaces = [i for i in (snap["network"].get("interfaces") or []) if isinstance(i, dict)]
    comm_id = (env.get("NCCL_COMM_ID") or "").rsplit(":", 1)[0].strip("[]") or None
    master = (snap["network"].get("master_addr") or {}).get("addresses") or []
    peer = comm_id or next((a for a in master if not _loopback(a)), None)
    local_addrs = {a for i in ifaces for a, _ in netfacts.v4(i)}
    remote = peer is not None and peer not in local_addrs and not _loopback(peer)
    spread = multi_node(snap) or (f"NCCL_COMM_ID={env['NCCL_COMM_ID']}" if comm_id and remote else None)
    guessed = None
    if not spread:
        # check32 (openpai#4638): ranks set by hand, rank 0 publishing its store on this host's routable address,
        # no local world size declared - the job may span hosts (a guess, worded so)
        guessed = spread = span_guessed(snap)
        if not spread:
            return
    nccl = netfacts.nccl_version_of(snap)
    skip_virbr = nccl is not None and nccl >= netfacts.NCCL_VIRBR_EXCLUDED_SINCE
    ipv6 = (env.get("NCCL_SOCKET_FAMILY") or "").strip() != "AF_INET"
    picked, why = netfacts.nccl_default_pick(ifaces, comm_id, skip_virbr=skip_virbr, ipv6=ipv6)
    if not picked:
        return
    old_nccl = ("" if skip_virbr else
                f" (NCCL {'.'.join(map(str, nccl))} takes virbr* like any NIC: only NCCL 2.28.3 and later leave it out)"
                if nccl else " (NCCL's version was not recorded: this is the choice of any NCCL before 2.28.3, which "
                             "takes virbr* like any NIC; from 2.28.3 NCCL leaves virbr* out)")
    by_name = {i["name"]: i for i in ifaces}
    candidates = [i for i in netfacts._ordered(ifaces) if i.get("up") is not False and _routable(i, netfacts)
                  and not _is_loopback_iface(i) and not i["name"].startswith("docker")]
    real = [i["name"] for i in candidates if not netfacts.is_virtual(i)]
    virtual = [n for n in picked if netfacts.is_virtual(by_name[n])]
    if not real:
        # inside a container's network namespace the way out is a veth (or a macvlan) that carries a routable
        # address, IPv6-only ones included (NVIDIA/nccl#529: ip6tnl0 with only fe80:: ahead of veth0's global
        # address): then only an interface NCCL picks whose addresses are all link-local is unreachable
        real = [i["name"] for i in candidates]
        virtual = [n for n in picked if n not in real and _link_local_only(by_name[n], netfacts)]
    listing = ", ".join(f"{i['name']}({'/'.join([a for a, _ in netfacts.v4(i)] + netfacts.v6(i)) or '-'})"
                        for i in ifaces)
    if virtual and real:
        best = next((r for r in real if peer and netfacts.same_subnet(by_name[r], peer)), real[0])
        role = ("bootstrap over it" if virtual[0] == picked[0] else
                f"use it beside {picked[0]} (its socket transport spreads traffic over every interface it selects)")
        yield warning(f"NCCL_SOCKET_IFNAME is unset and NCCL will {role}: {', '.join(virtual)} is virtual ("
                      + (f"the ranks may span hosts: {spread}" if guessed else spread) + ")",
                      detail=f"NCCL's default skips only docker*, lo and virbr* ({why}){old_nccl}; the other hosts cannot "
                             f"reach {virtual[0]}, so ncclCommInitRank or the first collective hangs or times out. "
                             + ("Whether ranks run on other hosts is a guess from the rendezvous address; on one host "
                                "this is harmless. " if guessed else "")
                             + f"Interfaces here: {listing}.",
                      fix=f"export NCCL_SOCKET_IFNAME=={best} GLOO_SOCKET_IFNAME={best}",
                      env_fix={}, subjects=["NCCL_SOCKET_IFNAME"] + [f"iface:{n}" for n in virtual] + [f"iface:{best}"],
                      evidence={"nccl_picks": picked, "virtual": virtual, "why": why, "real_interfaces": real,
                                "peer": peer, "guess": bool(guessed)})
        return
    container = (snap.get("host") or {}).get("container")
    if peer is None:  # no resolution recorded: an address literal in MASTER_ADDR is its own
        raw = str((snap.get("launcher") or {}).get("master_addr") or env.get("MASTER_ADDR") or "").strip().strip("[]")
        try:
            peer = str(ipaddress.ip_address(raw)) if raw and not _loopback(raw) else None
        except ValueError:
            peer = None
    if not comm_id and peer and real:
        # NCCL_IB_DISABLE / NCCL_NET=Socket: the user keeps NCCL off the IB fabric, so nothing says ib* is the
        # network the nodes share; otherwise an ib* pick is NCCL's designed preference (said as a note)
        ib_used = not (flag_on(env, "NCCL_IB_DISABLE") or (env.get("NCCL_NET") or "").strip().lower() == "socket")
        found = list(_bootstrap_elsewhere(picked, peer, real, by_name, listing, why, spread, guessed, container,
                                          netfacts, ib_used))
        if found:
            yield from found
            return
    if guessed:
        return  # the container-bridge arm below needs a rendezvous host that is known to be another
    # Kubernetes pods are not behind a NAT bridge: the pod network routes every pod's address to every other pod
    # without address translation (the Kubernetes network model, kubernetes/website
    # content/en/docs/concepts/services-networking/_index.md at 048a0f59), so pods on other nodes' subnets are reachable
    if container and container != "kubernetes" and peer and remote \
            and not any(netfacts.same_subnet(by_name[n], peer) for n in picked):
        addrs = [a for n in picked for a, _ in netfacts.v4(by_name[n])]
        if addrs and all(__import__("ipaddress").ip_address(a).is_private for a in addrs):
            yield warning(f"in a {container} container, NCCL will use {picked[0]} ({', '.join(addrs)}), which is not in "
                          f"the network of the rendezvous host {peer}",
                          detail="A container on a bridge network has a private address behind NAT: ranks on other "
                                 "hosts cannot connect back to it, and NCCL reports 'No interface found in the same "
                                 f"subnet as remote address'. Interfaces here: {listing}.",
                          fix="docker run --network=host ...   # or give the container an address on the cluster "
                              "network (macvlan, SR-IOV) and name it in NCCL_SOCKET_IFNAME",
                          subjects=["NCCL_SOCKET_IFNAME", f"iface:{picked[0]}"],
                          evidence={"nccl_picks": picked, "addresses": addrs, "peer": peer, "container": container})


def _bootstrap_elsewhere(picked, peer, real, by_name, listing, why, spread, guessed, container, netfacts,
                         ib_used=False):
    """NCCL's bootstrap listens on ONE interface, the first of its default order (data/nccl_bootstrap.json:
    src/bootstrap.cc bootstrapNetInit, ncclFindInterfaces(..., 1, ...) at 5067397c), and sends that interface's
    own address to its peers. Two ways the peers cannot reach it, read from the rendezvous address `peer`:
    (a) another real interface of this host is the one in the rendezvous' network (or holds its address) while
    the bootstrap one is in none of it: the NCCL guide's 'interfaces UP but not able to communicate between
    nodes'; (b) no interface is in the rendezvous' network, the rendezvous address is a public one and the
    bootstrap address is private: the peers reach this network through NAT, and the private address NCCL
    advertises is not theirs to reach.
    An ib* pick is NCCL's designed preference and the common healthy layout (IPoIB across the fabric every node
    shares): quiet, unless NCCL_IB_DISABLE / NCCL_NET=Socket keep NCCL off that fabric; a guess either way, since
    no snapshot shows what the other hosts can reach."""
    boot = picked[0]
    iface = by_name.get(boot)
    if iface is None or boot not in real or netfacts.same_subnet(iface, peer):
        return
    data = netfacts.nccl_bootstrap()
    owns = lambda i: peer in {a for a, _ in netfacts.v4(i)} or peer in netfacts.v6(i)  # noqa: E731
    if owns(iface):
        return
    carriers = [n for n in real if owns(by_name[n]) or netfacts.same_subnet(by_name[n], peer)]
    boot_addrs = [a for a, _ in netfacts.v4(iface)] or netfacts.v6(iface)
    spread_words = f"the ranks may span hosts: {spread}" if guessed else spread
    guess = ("Whether ranks run on other hosts is a guess from the rendezvous address; on one host this is "
             "harmless. " if guessed else "")
    if carriers:
        here = carriers[0]
        how = "holds" if owns(by_name[here]) else "is in the network of"
        if boot.startswith(str(data.get("prefer_prefix") or "ib")) and ib_used:
            return  # NCCL's designed preference, IPoIB on the fabric the job's IB transport uses: nothing to say
        ib_off = (f"NCCL_IB_DISABLE / NCCL_NET keep NCCL off the IB fabric, yet it prefers {boot} for its sockets. "
                  if boot.startswith(str(data.get("prefer_prefix") or "ib")) else "")
        yield warning(f"NCCL_SOCKET_IFNAME is unset and NCCL will bootstrap over {boot} ({', '.join(boot_addrs)}), "
                      f"not {here}, which {how} the rendezvous address {peer} ({spread_words})",
                      detail=f"NCCL's bootstrap takes one interface ({why}; src/bootstrap.cc asks ncclFindInterfaces "
                             f"for {data.get('bootstrap_interfaces', 1)}) and publishes its address to every other "
                             f"rank. Its choice does not look at where the peers are: {boot} is in another network "
                             f"than the rendezvous at {peer}. NCCL's troubleshooting guide: \"{data['docs_excerpt']}\" "
                             + ib_off + guess + f"If the other hosts reach {boot}'s network too, this is harmless; nothing "
                             f"here tells. Interfaces here: {listing}.",
                      fix=f"export NCCL_SOCKET_IFNAME=={here} GLOO_SOCKET_IFNAME={here}   # on every node, its NIC "
                          "on the network the nodes share",
                      subjects=["NCCL_SOCKET_IFNAME", f"iface:{boot}", f"iface:{here}"],
                      evidence={"nccl_bootstrap": boot, "bootstrap_addresses": boot_addrs, "why": why,
                                "rendezvous": peer, "rendezvous_interface": here, "guess": bool(guessed)})
        return
    try:
        far = ipaddress.ip_address(peer)
        mine = [ipaddress.ip_address(a) for a, _ in netfacts.v4(iface)]
    except ValueError:
        return
    if container or far.version != 4 or not far.is_global or not mine or \
            not all(m.is_private and not m.is_loopback for m in mine):
        return
    yield warning(f"the rendezvous {peer} is a public address, but NCCL will bootstrap over {boot} with the private "
                  f"address {', '.join(map(str, mine))}: hosts that reach this one only through NAT cannot connect "
                  f"back ({spread_words})",
                  detail=f"No interface of this host is in the network of {peer}: it is reached through address "
                         "translation (a cloud VPC's public IP, a router). NCCL's bootstrap listens on "
                         f"{boot} ({why}) and sends that interface's own, private, address to its peers "
                         "(src/bootstrap.cc createListenSocket / connectInfo.addr); Gloo and the c10d store's "
                         "peers do the same. From the other network that address is unreachable, so "
                         "ncclCommInitRank hangs or times out. Harmless only if every other node shares this "
                         "private network (then the public rendezvous address is a detour, not a fault). "
                         + guess + f"Interfaces here: {listing}.",
                  fix="# put every node on one routed network: the same VPC/subnet, VPC peering, or a VPN "
                      "(WireGuard) whose interface you then name: export NCCL_SOCKET_IFNAME==wg0 GLOO_SOCKET_IFNAME=wg0",
                  subjects=["NCCL_SOCKET_IFNAME", f"iface:{boot}", f"host:{peer}"],
                  evidence={"nccl_bootstrap": boot, "bootstrap_addresses": [str(m) for m in mine],
                            "rendezvous": peer, "nat": True, "guess": bool(guessed)})


@check("NET004", "rdma-gid-index-empty", family="network", needs=("env", "pci"))
def rdma_gid_index_empty(snap):
    """NCCL_IB_GID_INDEX names a GID slot that is empty on a RoCE port NCCL will use.

    What it checks
        NCCL_IB_GID_INDEX against the populated GID entries of each RoCE port (link layer
        Ethernet) that NCCL_IB_HCA selects, read from /sys/class/infiniband/<dev>/ports/<n>/gids
        and gid_attrs/types. NCCL uses the index as given on RoCE (src/transport/net_ib/connect.cc,
        ncclIbGetGidIndex: `*gidIndex = ncclParamIbGidIndex()` when it is >= 0; -1, the default
        since NCCL 2.21.5, picks a RoCE v2 GID by itself). InfiniBand ports do not use it.
        With it unset, on a job across hosts, under an NCCL older than 2.21.5 (whose default index
        was 0: NVIDIA/nccl ab2b89c4, `NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0)` before): whether
        GID 0 is a link-local RoCE v1 entry while the port has a RoCE v2 one. A forced index whose GID is
        link-local (fe80::/64) on a job across hosts, while the port has a routable GID: NCCL's own choice
        skips those (connect.cc validGid/linkLocalGid, @e5d9a7ae), a forced one is used as given.

    Why it matters
        Connecting a queue pair with an empty GID fails at the first collective: "NCCL WARN Call to
        ibv_modify_qp failed with error No such device" (or "Invalid argument"; NCCL itself hints
        "the incorrect GID index is forced by NCCL_IB_GID_INDEX", src/misc/ibvwrap.cc). The index is
        per port, so a value copied from another machine or pod is often wrong here (NVIDIA/nccl#718).

    Example
        NCCL_IB_GID_INDEX=5 in the job spec, on a pod whose HCA has GIDs at 6 and 7 only.

    Fix
        unset NCCL_IB_GID_INDEX (NCCL then chooses a RoCE v2 GID), or set it per host from `show_gids`.
    """
    env = env_of(snap)
    raw = env.get("NCCL_IB_GID_INDEX")
    pci = snap.get("pci") or {}
    if not nccl_ib_wanted(env, pci) or not pci.get("rdma_ports"):
        return
    if raw is None:
        yield from _default_gid_zero(snap, env, pci)
        return
    try:
        index = int(raw.strip())
    except ValueError:
        return  # NCCL003 judges the value itself
    if index < 0:
        return
    roce = {k: p for k, p in nccl_ib_ports(env, pci).items() if str(p.get("link_layer") or "").lower() == "ethernet"}
    empty = sorted(k for k, p in roce.items() if str(index) not in (p.get("gids") or {}))
    if not empty:
        yield from _forced_gid_link_local(snap, raw, index, roce)
        return
    have = {k: sorted((roce[k].get("gids") or {}), key=lambda i: int(i) if i.isdigit() else 0) for k in empty}
    v2 = {k: [i for i in have[k] if "v2" in str((roce[k]["gids"][i] or {}).get("type") or "").lower()] for k in empty}
    yield error(f"NCCL_IB_GID_INDEX={index} is an empty GID slot on RoCE port(s) {', '.join(empty[:4])}",
                detail=("NCCL uses the GID at this index on RoCE ports (src/transport/net_ib/connect.cc, ncclIbGetGidIndex) "
                        "and connecting with an empty one fails with 'ibv_modify_qp failed with error No such device'. "
                        "Populated here: " + "; ".join(f"{k}: {', '.join(have[k]) or 'none'}"
                                                       + (f" (RoCE v2: {', '.join(v2[k])})" if v2[k] else "")
                                                       for k in empty[:4]) + "."),
                fix="unset NCCL_IB_GID_INDEX   # NCCL picks a RoCE v2 GID itself; or the index `show_gids` gives on this host",
                subjects=["NCCL_IB_GID_INDEX"] + [f"rdma:{k}" for k in empty[:8]],
                evidence={"NCCL_IB_GID_INDEX": raw, "ports": {k: have[k] for k in empty}})


def _link_local(gid: str) -> bool:
    """NCCL's linkLocalGid (src/transport/net_ib/connect.cc): the GID's first 64 bits are fe80:0000:0000:0000."""
    g = str(gid or "").lower().replace(":", "")
    return len(g) == 32 and g.startswith("fe80000000000000")


def _forced_gid_link_local(snap, raw, index, roce):
    """NCCL_IB_GID_INDEX forces a link-local (fe80::/64) GID on a job across hosts, while the port has a routable one.

    NVIDIA/nccl src/transport/net_ib/connect.cc@e5d9a7ae (ncclIbGetGidIndex): a forced index is used as given
    (`*gidIndex = ncclParamIbGidIndex(); if (*gidIndex >= 0) return`), while NCCL's own choice only takes a GID that
    validGid() accepts, and validGid() rejects linkLocalGid(): an fe80::/64 address is not routed, so queue pairs
    between hosts time out ('Call to ibv_modify_qp failed with error Connection timed out', NVIDIA/nccl#769)."""
    if not multi_node(snap):
        return
    bad = {}
    for k, port in roce.items():
        gids = port.get("gids") or {}
        forced = gids.get(str(index)) or {}
        if not _link_local(forced.get("gid")):
            continue
        routable = sorted((i for i, g in gids.items() if isinstance(g, dict) and g.get("gid")
                           and not _link_local(g["gid"]) and str(g["gid"]).strip("0:")),
                          key=lambda i: int(i) if str(i).isdigit() else 0)
        if routable:
            bad[k] = {"forced": forced.get("gid"), "type": forced.get("type"),
                      "routable": {i: gids[i].get("type") for i in routable}}
    if not bad:
        return
    k0 = next(iter(bad))
    v2 = [i for i, t in bad[k0]["routable"].items() if "v2" in str(t).lower()]
    yield warning(f"NCCL_IB_GID_INDEX={index} selects a link-local (fe80::) GID on RoCE port(s) {', '.join(list(bad)[:4])}, "
                  "which is not routed between hosts",
                  detail=("NCCL uses a forced GID index as given (src/transport/net_ib/connect.cc, ncclIbGetGidIndex), "
                          "while its own choice skips link-local GIDs (validGid/linkLocalGid): queue pairs to other "
                          "hosts built on an fe80::/64 GID time out ('Call to ibv_modify_qp failed with error Connection "
                          "timed out', NVIDIA/nccl#769). Routable GIDs here: "
                          + "; ".join(f"{k}: {', '.join(f'{i} ({t})' for i, t in b['routable'].items())}"
                                      for k, b in list(bad.items())[:4]) + "."),
                  fix=(f"export NCCL_IB_GID_INDEX={v2[0]}   # the routable RoCE v2 GID (show_gids); or unset it on NCCL >= 2.21.5"
                       if v2 else "unset NCCL_IB_GID_INDEX   # or the index `show_gids` gives for the IPv4 RoCE v2 GID"),
                  subjects=["NCCL_IB_GID_INDEX"] + [f"rdma:{k}" for k in list(bad)[:8]],
                  evidence={"NCCL_IB_GID_INDEX": raw, "ports": bad})


NCCL_AUTO_GID_SINCE = (2, 21, 5)  # NVIDIA/nccl ab2b89c4: IB_GID_INDEX default 0 -> -1 (pick RoCE v2 itself)


def _default_gid_zero(snap, env, pci):
    from ddpdoctor.facts import net as netfacts

    spread = multi_node(snap)
    if not spread:
        return
    nccl = netfacts.nccl_version_of(snap)
    if nccl is not None and nccl >= NCCL_AUTO_GID_SINCE:
        return
    roce = {k: p for k, p in nccl_ib_ports(env, pci).items() if str(p.get("link_layer") or "").lower() == "ethernet"}
    bad = {}
    for k, port in roce.items():
        gids = port.get("gids") or {}
        zero = gids.get("0") or {}
        v2 = [i for i, g in gids.items() if "v2" in str((g or {}).get("type") or "").lower()
              and ":ffff:" in str((g or {}).get("gid") or "").lower()]
        if zero and str(zero.get("gid") or "").lower().startswith("fe80") and v2:
            bad[k] = sorted(v2, key=lambda i: int(i) if i.isdigit() else 0)
    if not bad:
        return
    first = next(iter(sorted(bad)))
    version = (f"NCCL {'.'.join(map(str, nccl))}" if nccl else
               "NCCL's version was not recorded (torch.cuda.nccl.version()): this holds for any NCCL older than 2.21.5")
    yield warning(f"NCCL_IB_GID_INDEX is unset and NCCL will use GID 0 on RoCE port(s) {', '.join(sorted(bad)[:4])}: "
                  f"a link-local RoCE v1 address that only reaches hosts on the same layer-2 network",
                  detail=f"{version}; NCCL before 2.21.5 used GID index 0 unless told otherwise (NVIDIA/nccl "
                         f"ab2b89c4 made the default pick a RoCE v2 GID). GID 0 is link-local (fe80::) RoCE v1, "
                         f"which routers do not forward: between hosts behind different switches or subnets the "
                         f"queue pairs time out ('NET/IB : Got completion ... with error 12, ... vendor err 129'). "
                         f"RoCE v2 IPv4 GIDs here: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(bad.items())[:4])
                         + f" ({spread}).",
                  fix=f"export NCCL_IB_GID_INDEX={bad[first][-1]}   # the RoCE v2 IPv4 entry of `show_gids` on each host; "
                      f"or an NCCL of 2.21.5 or later, which picks it itself",
                  subjects=["NCCL_IB_GID_INDEX"] + [f"rdma:{k}" for k in sorted(bad)[:8]],
                  evidence={"nccl": ".".join(map(str, nccl)) if nccl else None, "roce_v2_gids": bad, "why_multi_node": spread})


def _port_ranges(allowed: list, proto: str = "tcp") -> list:
    """[(lo, hi)] of the TCP ports a firewall's allow list opens to every source ("22/tcp", "40000-40050/tcp")."""
    out = []
    for item in allowed or []:
        m = re.fullmatch(r"(\d+)(?:[-:](\d+))?/(tcp|any)", str(item).strip())
        if m and m.group(3) in (proto, "any"):
            out.append((int(m.group(1)), int(m.group(2) or m.group(1))))
    return out


def _covered(lo: int, hi: int, ranges: list) -> bool:
    """Whether [lo, hi] lies inside the union of `ranges`."""
    at = lo
    for a, b in sorted(ranges):
        if a > at:
            break
        at = max(at, b + 1)
        if at > hi:
            return True
    return at > hi


# Istio's sidecar: istio-iptables redirects the pod's outbound TCP to Envoy's port 15001 and its inbound TCP to 15006
# (istio/istio tools/istio-iptables/pkg/cmd/root.go bindFlags, envoy-port / inbound-capture-port defaults, at
# 2e4f3099); traffic to 127.0.0.1 is left alone (ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR 127.0.0.1/32,
# tools/istio-iptables/pkg/constants/constants.go at c15acc40). Envoy runs in the pod's network namespace, so its
# listeners show in this process's /proc/net/tcp.
ISTIO_CAPTURE_PORTS = (15001, 15006)


def _service_mesh_sidecar(snap):
    """Envoy's capture listeners in this network namespace on a job of several ranks: an Istio sidecar intercepts
    the ranks' TCP connections. Quiet on one host when NCCL and Gloo are told to use loopback, which Istio leaves
    alone (the reporters' workaround in kubeflow/kubeflow#5143)."""
    ports = snap["network"].get("listening_tcp_ports") or []
    if not all(p in ports for p in ISTIO_CAPTURE_PORTS):
        return
    from ddpdoctor.facts.ranks import world_size
    env = env_of(snap)
    world = world_size(snap)
    spread = multi_node(snap)
    if world.value < 2 and not spread:
        return
    if not spread:
        ifaces = [n.strip().lstrip("=") for n in (env.get("NCCL_SOCKET_IFNAME") or "").split(",") if n.strip()]
        if ifaces and all(n == "lo" for n in ifaces) and (env.get("GLOO_SOCKET_IFNAME") or "lo") == "lo":
            return
    where = f"a job that spans hosts ({spread})" if spread else f"a job of {world.value} ranks ({world.source})"
    container = (snap.get("host") or {}).get("container") if "host" in snap else None
    yield warning(
        f"an Istio sidecar (Envoy listening on {ISTIO_CAPTURE_PORTS[0]} and {ISTIO_CAPTURE_PORTS[1]}) intercepts "
        f"this {'pod' if container == 'kubernetes' else 'host'}'s TCP connections, on {where}",
        detail=("Istio's init container installs iptables rules that send every outbound TCP connection of the pod to "
                "Envoy's port 15001 and every inbound one to 15006 (istio/istio tools/istio-iptables, root.go). NCCL's "
                "bootstrap and socket transport and Gloo connect between ranks on ephemeral ports of the pod's "
                "address; through the sidecar they stall, are reset, or are refused under strict mTLS, and "
                "init_process_group or the first collective hangs (kubeflow/kubeflow#5143, NVIDIA/nccl#1638, "
                "kubeflow/pytorch-operator#258). Only traffic to 127.0.0.1 is left alone."),
        fix=('metadata.annotations: {sidecar.istio.io/inject: "false"}   # on the training pods (PyTorchJob/MPIJob '
             "replica templates)" + ("" if spread else "; or, with every rank in this pod: export "
                                     "NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo")),
        subjects=["sidecar:istio", "NCCL_SOCKET_IFNAME"],
        evidence={"listening_tcp_ports": [p for p in ports if 15000 <= p <= 15090], "world_size": world.value,
                  "why_multi_node": spread, "container": container})


@check("NET005", "firewall-blocks-nccl-ports", family="network", needs=("env", "network"))
def firewall_blocks_nccl_ports(snap):
    """A host firewall that denies incoming connections blocks the ports NCCL and Gloo listen on.

    What it checks
        On a job that spans several nodes, the host firewall's configuration (ufw or firewalld, as
        their files show it: enabled, the default for incoming connections, the ports and sources
        it allows) against the ports the job needs: MASTER_PORT, and the ephemeral range
        (net.ipv4.ip_local_port_range) that NCCL's and Gloo's sockets listen on. A source rule
        ("allow from 10.0.0.0/8") is taken to cover the cluster. Ranks set by hand that publish
        MASTER_ADDR on this host's routable address may span hosts: a worded guess. With no launcher,
        rank or scheduler variable at all (Ray, exo, a custom server), whether other machines connect
        is unknown: a note naming that ambiguity. Also an Istio sidecar in the pod: Envoy's capture
        listeners (15001 outbound, 15006 inbound) in this network namespace on a job of several ranks.

    Why it matters
        NCCL binds its bootstrap and network sockets to port 0 unless NCCL_COMM_ID forces one
        (ncclSocketListen, src/misc/socket.cc), so the kernel picks them from the ephemeral range. A
        firewall that opens only SSH and the rendezvous port lets init_process_group start and then
        fails every connection between nodes: "socketStartConnect: Connect to ... failed : Software
        caused connection abort" (NVIDIA/nccl-tests#162) or ncclSystemError (huggingface/trl#4737).
        An Istio sidecar does the same from inside the pod: its init container's iptables rules send
        every TCP connection into Envoy, so NCCL's and Gloo's connections between ranks stall or are
        refused (kubeflow/kubeflow#5143, NVIDIA/nccl#1638, kubeflow/pytorch-operator#258).

    Example
        ufw enabled with default deny and `allow 22/tcp` on two training nodes.

    Fix
        Allow the cluster's subnet (`sudo ufw allow from 10.0.0.0/16`, or firewalld's trusted zone
        with `--add-source`), or turn the firewall off on the training network. For Istio, keep the
        sidecar out of the training pods: the annotation `sidecar.istio.io/inject: "false"`.
    """
    yield from _service_mesh_sidecar(snap)
    fw = snap["network"].get("firewall") or {}
    if not fw or fw.get("active") is not True or fw.get("default_incoming") not in ("deny", "reject"):
        return
    spread = multi_node(snap)
    guessed = unknown = None
    if not spread:
        # ranks set by hand with the store on this host's routable address may span hosts (a guess, worded so);
        # a job no launcher or rank variable describes may or may not (a note naming that ambiguity)
        guessed = spread = span_guessed(snap)
        if not spread:
            unknown = span_unknown(snap)
            if not unknown:
                return
            spread = "an unknown number of hosts"
    allowed = fw.get("allowed")
    tool = fw.get("tool") or "the firewall"
    if unknown and allowed is None:
        return
    if allowed is None:
        yield info(f"{tool} is enabled and denies incoming connections by default; its rules are not readable here",
                   detail=(f"The job spans {spread}. NCCL and Gloo listen on ephemeral ports between the nodes; whether "
                           f"{tool}'s rules let them through cannot be read without root (a guess, not a finding)."),
                   fix=f"sudo {'ufw status verbose' if tool == 'ufw' else 'firewall-cmd --list-all'}   # check the rules allow the cluster subnet",
                   subjects=[f"firewall:{tool}"], evidence={"firewall": fw, "why_multi_node": spread})
        return
    if any(str(a).startswith("from ") for a in allowed):
        return
    env = env_of(snap)
    ranges = _port_ranges(allowed)
    eph = snap["network"].get("ip_local_port_range") or [32768, 60999]
    master = env_int(env, "MASTER_PORT") or 29500
    blocked = []
    if not _covered(eph[0], eph[1], ranges):
        blocked.append(f"the ephemeral ports {eph[0]}-{eph[1]} NCCL and Gloo listen on")
    if not _covered(master, master, ranges):
        blocked.append(f"MASTER_PORT {master}")
    if not blocked:
        return
    if unknown:
        yield info(f"{tool} denies incoming connections and opens only {', '.join(allowed) or 'nothing'}: if processes "
                   "on other machines connect to this host, it blocks them; check cannot tell whether they do",
                   detail=(f"Single host or several: {unknown}. On one host the firewall is harmless (loopback is "
                           "not filtered); across hosts, NCCL, Gloo and most distributed runtimes listen on ephemeral "
                           f"ports ({eph[0]}-{eph[1]}) that this firewall closes, so peers cannot connect."),
                   fix=("sudo ufw allow from <cluster subnet>   # only if this host takes connections from other "
                        "machines" if tool == "ufw" else
                        "sudo firewall-cmd --permanent --zone=trusted --add-source=<cluster subnet> && sudo "
                        "firewall-cmd --reload   # only if other machines connect here"),
                   subjects=[f"firewall:{tool}"],
                   evidence={"firewall": fw, "ip_local_port_range": eph, "span": "unknown"})
        return
    scope = " if other ranks run on other hosts" if guessed else ""
    spans = (f"Guess: the job may span hosts ({spread}); this host cannot see where the other ranks run."
             if guessed else f"The job spans {spread}.")
    yield warning(f"{tool} denies incoming connections and opens only {', '.join(allowed) or 'nothing'}: "
                  f"it blocks {' and '.join(blocked)}{scope}",
                  detail=(f"{spans} NCCL binds its sockets to port 0 unless NCCL_COMM_ID forces one "
                          "(ncclSocketListen, src/misc/socket.cc), so the kernel picks them from "
                          f"net.ipv4.ip_local_port_range ({eph[0]}-{eph[1]}); connections between nodes then fail "
                          "('socketStartConnect: Connect to ... failed', ncclSystemError) after the rendezvous worked."),
                  fix=("sudo ufw allow from <cluster subnet>   # e.g. 10.0.0.0/16" if tool == "ufw" else
                       "sudo firewall-cmd --permanent --zone=trusted --add-source=<cluster subnet> && sudo firewall-cmd --reload"),
                  subjects=[f"firewall:{tool}", "MASTER_PORT"],
                  evidence={"firewall": fw, "ip_local_port_range": eph, "MASTER_PORT": master, "why_multi_node": spread,
                            "guess": bool(guessed)})


GLOO_LOOPBACK_FALLBACK_SINCE = (1, 3)  # pytorch/pytorch#26166 (2019-09-13, ProcessGroupGloo::createDefaultDevice), torch 1.3


def _gloo_cannot_start(snap, own: dict):
    """Before torch 1.3 Gloo's default device resolved the hostname and crashed when it did not resolve (#26166)."""
    ifaces = snap["network"].get("interfaces") or []
    sole = sole_cluster_iface(ifaces)
    yield warning(f"this host's name {own.get('host')!r} does not resolve ({own.get('error')}): Gloo cannot start under "
                  "torch before 1.3 (GLOO_SOCKET_IFNAME unset)",
                  detail=("Before torch 1.3 Gloo's default device looked up the hostname and failed when it did not resolve, "
                          "even on one host: \"[enforce fail at gloo/transport/tcp/device.cc] rp != nullptr. Unable to find "
                          "address for: <hostname>\" (msr-fiddle/pipedream#32); torch 1.3 added the loopback fallback "
                          "(pytorch/pytorch#26166). Any Gloo process group (backend=\"gloo\", or a CPU group) hits it."),
                  fix=f"export GLOO_SOCKET_IFNAME={sole or 'lo'}   # or add the hostname to /etc/hosts",
                  env_fix={"GLOO_SOCKET_IFNAME": sole} if sole else {},
                  subjects=["GLOO_SOCKET_IFNAME", f"host:{own.get('host')}"],
                  evidence={"own_hostname": own, "torch": ((snap.get("packages") or {}).get("versions") or {}).get("torch")})


# torchrun's elastic agent (group rank 0) publishes MASTER_ADDR for its workers: SimpleElasticAgent._set_master_addr_port
# falls back to _get_fq_hostname() = socket.getfqdn(socket.gethostname()) when the spec has no master_addr (pytorch/pytorch
# torch/distributed/elastic/agent/server/api.py @ be6d2665d7c5), and newer torch's RendezvousStoreInfo.build uses
# `local_addr or socket.getfqdn()` (torch/distributed/elastic/rendezvous/api.py; dynamic_rendezvous._NodeDescGenerator
# likewise). launch_agent gives the spec a master_addr only for the static rendezvous (--master-addr); --standalone
# means rdzv_backend=c10d, rdzv_endpoint=localhost:0 (torch/distributed/run.py run()), so there the host's name is used.
# CPython's getfqdn returns the name unchanged when it does not resolve.


def _elastic_agent_names_itself(snap, own: dict):
    """One host, no MASTER_ADDR of the process's own (outside a worker; a worker's MASTER_ADDR is NET002's): this host's
    name does not resolve, or resolves to no address of this host. Under torchrun --standalone (or any c10d/etcd
    rendezvous) the agent hands that name to its workers as MASTER_ADDR, so init_process_group cannot reach the store
    even on one host ("The IPv6 network addresses of (<hostname>, <port>) cannot be retrieved (gai error: -3 ...)")."""
    env = launch_env(snap)
    if env.get("MASTER_ADDR") or env.get("PET_LOCAL_ADDR") or env.get("PET_MASTER_ADDR"):
        return  # a worker (NET002 judges its MASTER_ADDR), or the agent is told which address to publish
    if _torch_at_least(snap, GLOO_LOOPBACK_FALLBACK_SINCE) is False:
        return
    backend = (env.get("PET_RDZV_BACKEND") or "").strip().lower()
    if backend == "static":
        return  # the static rendezvous publishes --master-addr (default 127.0.0.1), not the host's name
    ifaces = snap["network"].get("interfaces") or []
    local = {a.get("address") for i in ifaces for a in (i.get("addresses") or [])}
    addrs = own.get("addresses") or []
    if own.get("error"):
        why = f"does not resolve ({own['error']})"
    elif addrs and not any(a in local or _loopback(a) for a in addrs):
        why = f"resolves to {', '.join(addrs)}, which no interface here has"
    else:
        return
    host = own.get("host")
    scope = "" if backend else " under torchrun --standalone (or a c10d rendezvous)"
    yield warning(f"this host's name {host!r} {why}: torchrun's workers will get MASTER_ADDR={host}{scope} and "
                  "fail to reach the store, even on one host",
                  detail=("torchrun's elastic agent publishes socket.getfqdn() of this host as the workers' MASTER_ADDR "
                          "unless --master-addr (static rendezvous only) or --local-addr names one "
                          "(torch/distributed/elastic/agent/server/api.py _set_master_addr_port, rendezvous/api.py "
                          "RendezvousStoreInfo.build); --standalone is a c10d rendezvous on localhost:0, so it takes "
                          "this path. getfqdn returns the bare name when it does not resolve, and each worker's "
                          f"TCPStore then fails: \"The IPv6 network addresses of ({host}, <port>) cannot be retrieved "
                          "(gai error: -3 - Temporary failure in name resolution)\". The plain `torchrun --nproc-per-node "
                          "N` (static rendezvous, MASTER_ADDR 127.0.0.1) is not affected."),
                  fix=(f"echo '127.0.1.1 {host}' | sudo tee -a /etc/hosts   # or: torchrun --nproc-per-node N ... "
                       "(no --standalone), or --local-addr 127.0.0.1"),
                  subjects=[f"host:{host}"],
                  evidence={"own_hostname": own, "PET_RDZV_BACKEND": backend or None,
                            "torch": ((snap.get("packages") or {}).get("versions") or {}).get("torch")})


def _loopback_name_span_unknown(snap, own: dict):
    """A job nothing describes (span_unknown): this host's name resolves to loopback only (Debian/Ubuntu's
    `127.0.1.1 <hostname>` line) while it has a routable interface. Harmless alone; a server that binds or advertises
    its hostname's address is unreachable from other machines (Gloo's fallback, tmills/uhhmm#51's work server). A note
    naming the ambiguity: check cannot tell whether other machines connect here."""
    unknown = span_unknown(snap)
    addrs = own.get("addresses") or []
    if not unknown or own.get("error") or not addrs or not all(_loopback(a) for a in addrs):
        return
    ifaces = snap["network"].get("interfaces") or []
    if not any(not _loopback(a.get("address") or "127.0.0.1") for i in ifaces if i.get("up") and i.get("name") != "lo"
               for a in (i.get("addresses") or [])):
        return  # nothing routable here: no other machine could connect anyway
    sole = sole_cluster_iface(ifaces) or "<the interface other machines reach>"
    host = own.get("host")
    yield info(f"this host's name {host!r} resolves to loopback only ({', '.join(addrs)}): if processes on other "
               "machines connect to this host by its name or to what it binds there, they cannot reach it; check "
               "cannot tell whether they do",
               detail=(f"Single host or several: {unknown}. Gloo binds to the address its hostname resolves to and "
                       "falls back to loopback; other servers that bind or advertise gethostbyname(hostname) listen "
                       "where no other machine can connect (Debian and Ubuntu write `127.0.1.1 <hostname>` into "
                       "/etc/hosts)."),
               fix=(f"export GLOO_SOCKET_IFNAME={sole}   # and map {host} to {sole}'s address in /etc/hosts, "
                    "only if other machines connect here"),
               subjects=[f"host:{host}"],
               evidence={"own_hostname": own, "span": "unknown", "interface": sole})


@check("NET006", "gloo-hostname-loopback", family="network", needs=("env", "network"), reads=("launch",))
def gloo_hostname_loopback(snap):
    """Gloo will bind to a loopback address: this host's name does not resolve to one of its interfaces.

    What it checks
        On a job that spans several nodes with GLOO_SOCKET_IFNAME unset: the addresses this host's
        own name resolves to (the name Gloo's default device looks up) against the addresses of its
        interfaces. Reported when the name does not resolve, resolves only to loopback addresses
        (Debian's `127.0.1.1 <hostname>` line), or to no address this host has. Under torch before
        1.3 a name that does not resolve is reported on one host too: Gloo had no loopback fallback then.
        Rank 0 of ranks set by hand (no local world size, no node count) cannot know where the others
        run; when it publishes MASTER_ADDR as its own routable address, not loopback, the finding is
        made as a guess ("if other ranks run on other hosts", pytorch/gloo#223); so is it for another
        rank whose MASTER_ADDR names another host than this one yet resolves here to loopback.
        On one host outside a worker (no MASTER_ADDR), under torch 1.3 or later: a name that does
        not resolve, or resolves to no address of this host, is reported because torchrun's elastic
        agent hands socket.getfqdn() to its workers as MASTER_ADDR under --standalone or any c10d
        rendezvous (not the static one, PET_RDZV_BACKEND=static), unless --local-addr names one.
        With no launcher, rank or scheduler variable at all, a name that resolves to loopback only
        while a routable interface exists is a note: whether other machines connect is unknown.

    Why it matters
        Without GLOO_SOCKET_IFNAME, torch's Gloo process group binds to the address the hostname
        resolves to, and falls back to loopback when that is not a local address ("Unable to resolve
        hostname to a (local) address. Using the loopback address as fallback. Manually set the network
        interface to bind to with GLOO_SOCKET_IFNAME.", ProcessGroupGloo, in libtorch_cpu.so). The
        other nodes then connect to their own loopback: "Gloo connectFullMesh failed"
        (aws-samples/aws-do-eks#50). The Gloo group is what init_process_group uses for CPU
        collectives and what many launchers use for coordination.

    Example
        A Kubernetes pod with hostNetwork whose hostname is not in DNS, on two nodes.

    Fix
        export GLOO_SOCKET_IFNAME=<the interface of the cluster network>   # as for NCCL_SOCKET_IFNAME
    """
    env = env_of(snap)
    if env.get("GLOO_SOCKET_IFNAME"):
        return
    spread = multi_node(snap)
    own = snap["network"].get("own_hostname")
    if not isinstance(own, dict):
        return
    guessed = None
    if not spread:
        if own.get("error") and _torch_at_least(snap, GLOO_LOOPBACK_FALLBACK_SINCE) is False:
            yield from _gloo_cannot_start(snap, own)
            return
        guessed = spread = span_guessed(snap)  # hand-set ranks whose MASTER_ADDR says they may span hosts
        if not spread:
            found = list(_elastic_agent_names_itself(snap, own))
            yield from found
            if not found:
                yield from _loopback_name_span_unknown(snap, own)
            return
    ifaces = snap["network"].get("interfaces") or []
    local = {a.get("address") for i in ifaces for a in (i.get("addresses") or [])}
    addrs = own.get("addresses") or []
    if own.get("error"):
        why = f"does not resolve ({own['error']})"
    elif addrs and all(_loopback(a) for a in addrs):
        why = f"resolves to loopback only ({', '.join(addrs)})"
    elif addrs and not any(a in local for a in addrs):
        why = f"resolves to {', '.join(addrs)}, which no interface here has"
    else:
        return
    sole = sole_cluster_iface(ifaces)
    scope = " if other ranks run on other hosts" if guessed else ""
    spans = (f"Guess: the job may span hosts ({spread}); this host cannot see where the other ranks run."
             if guessed else f"The job spans {spread}.")
    yield warning(f"this host's name {own.get('host')!r} {why}: Gloo will bind to loopback (GLOO_SOCKET_IFNAME unset)"
                  f"{scope}",
                  detail=(f"{spans} Without GLOO_SOCKET_IFNAME, Gloo binds to the address its hostname "
                          "resolves to and falls back to loopback ('Unable to resolve hostname to a (local) address. Using "
                          "the loopback address as fallback'), so ranks on other nodes cannot reach this one: 'Gloo "
                          "connectFullMesh failed'."),
                  fix=f"export GLOO_SOCKET_IFNAME={sole or '<interface of the cluster network>'}",
                  env_fix={"GLOO_SOCKET_IFNAME": sole} if sole else {},
                  subjects=["GLOO_SOCKET_IFNAME", f"host:{own.get('host')}"],
                  evidence={"own_hostname": own, "why_multi_node": spread, "guess": bool(guessed)})


@check("NET007", "multi-node-over-sockets", family="network", needs=("env", "pci"), reads=("network", "gpus"))
def multi_node_over_sockets(snap):
    """A job across hosts whose inter-node traffic NCCL can only send over TCP sockets.

    What it checks
        A multi-node job (the launcher's figures, Slurm's node count, or a MASTER_ADDR on another
        host) on a host with no RDMA device (/sys/class/infiniband empty: no InfiniBand, RoCE or
        EFA) and no external NCCL network plugin; with the speed of the fastest interface that is up.
        RDMA devices switched off by NCCL_IB_DISABLE are GPU013's (NCCL004's without GPU facts) to
        report. And, as a warning: NCCL_NET naming the socket transport ("Socket", any case: NCCL
        compares NCCL_NET with each net's name by strcasecmp, src/plugin/net.cc; the names are in
        data/settings.json NCCL_NET net_names) on a multi-node job whose host has RDMA devices NCCL's IB
        transport uses (not EFA-like ones): NCCL keeps its inter-node traffic on TCP although IB/RoCE is
        there.
        Also, as a warning: RDMA devices that NCCL's built-in IB transport skips (a link layer neither
        InfiniBand nor Ethernet, as AWS EFA's; src/transport/net_ib/init.cc) and no net plugin
        (aws-ofi-nccl's libnccl-net.so) on LD_LIBRARY_PATH: the hardware is there and unused, NCCL
        logs "No plugin found (libnccl-net.so)" only at INFO (NVIDIA-NeMo/RL#1973,
        aws/aws-parallelcluster#6942). And, as a warning: RDMA devices whose every port NCCL would
        select is known and not ACTIVE (NCCL skips such ports): this host falls back to sockets while
        hosts whose ports are up use IB (NVIDIA/nccl-tests#188, "socketFinalizeAccept: wrong type").
        And, as a warning: HPE Slingshot NICs (cxi_user devices, else hsn<N> interfaces) with no net
        plugin found: NCCL's built-in nets are IB verbs and sockets only (src/plugin/net.cc), so
        without aws-ofi-nccl the fabric carries nothing (HPE's note: "an undesirable fallback to
        sockets"; data/cxi_settings.json without_plugin).

    Why it matters
        NCCL picks its network transport at init: IB/RoCE verbs when a device exists (src/transport/
        net_ib), else its socket transport (NET/Socket) over the host's TCP interfaces. Gradients then
        cross nodes at NIC speed through the CPU, and scaling from one node to two can make a step
        several times slower (mosaicml/llm-foundry#336: "problem was no infiniband"). A note, not a
        fault: on an Ethernet-only cluster this is expected, and the figure tells what to expect.

    Example
        torchrun --nnodes 2 --nproc-per-node 8 on two hosts joined by 10 GbE.

    Fix
        Run on hosts with InfiniBand/RoCE (and pass /dev/infiniband into the container), or accept
        socket speed: larger gradient buckets (DDP bucket_cap_mb), gradient accumulation, and
        NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD for fast Ethernet.
    """
    from ddpdoctor.facts.net import multi_node

    pci = snap.get("pci") or {}
    rdma = pci.get("rdma_devices")
    if rdma:
        yield from _net_forced_to_sockets(snap, rdma)
        # RDMA devices NCCL's own IB transport skips (EFA) and no plugin to reach them: sockets all the same
        yield from _rdma_needs_net_plugin(snap)
        yield from _rdma_ports_down(snap)
        return
    if rdma is None:
        return  # unknown (not gathered); RDMA devices NCCL uses: NCCL004 says when a setting turns them off
    if [p for p in pci.get("net_plugins") or [] if p]:
        return  # an external plugin (aws-ofi-nccl, a vendor's) carries its own transport
    spread = multi_node(snap)
    if not spread:
        return
    slingshot = list(_slingshot_without_plugin(snap, spread))
    if slingshot:
        yield from slingshot
        return  # not an Ethernet-only cluster: the note below would say the wrong thing
    ifaces = [i for i in (snap.get("network") or {}).get("interfaces") or []
              if isinstance(i, dict) and i.get("up") and i.get("name") != "lo"]
    speeds = [i.get("speed_mbps") for i in ifaces if isinstance(i.get("speed_mbps"), int) and i["speed_mbps"] > 0]
    fastest = max(speeds) if speeds else None
    speed = f" (fastest interface up: {fastest / 1000:g} Gb/s)" if fastest else ""
    yield info(
        f"the job spans hosts ({spread}) but NCCL will cross them over TCP sockets{speed}",
        detail=("This host has no RDMA device (no InfiniBand, RoCE or EFA under /sys/class/infiniband) and no NCCL "
                "network plugin, so NCCL uses its socket transport (NET/Socket) between nodes: gradients cross at NIC "
                "speed through the CPU, and a two-node job can step slower than one node (an all-reduce of a 1 GB "
                "model over 10 Gb/s takes over a second). Expected on an Ethernet-only cluster."),
        fix=("run on hosts with InfiniBand/RoCE (docker: --device /dev/infiniband --ulimit memlock=-1), or tune for "
             "sockets: NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4, larger DDP buckets (bucket_cap_mb), gradient "
             "accumulation"),
        subjects=[],
        evidence={"why_multi_node": spread, "rdma_devices": rdma, "fastest_interface_mbps": fastest})


def _slingshot_without_plugin(snap, spread):
    """NET007 on HPE Slingshot: CXI NICs here (facts.net.slingshot_nics), no NCCL net plugin found and sockets not
    asked for. NCCL's built-in networks are IB verbs and sockets only (NVIDIA/nccl src/plugin/net.cc @5067397c), and
    a CXI NIC is no verbs device: without aws-ofi-nccl (libfabric's cxi provider) NCCL crosses the nodes over TCP;
    HPE's note sets NCCL_NET='AWS Libfabric' to prevent "an undesirable fallback to sockets" (data/cxi_settings.json
    without_plugin)."""
    from ddpdoctor.facts.net import cxi_without_plugin, slingshot_nics  # noqa: PLC0415

    env = env_of(snap)
    if (env.get("NCCL_NET") or "").strip().lower() == "socket" or \
            (env.get("NCCL_NET_PLUGIN") or "").strip().lower() == "none":
        return  # sockets asked for
    nics = slingshot_nics(snap)
    if not nics:
        return
    said = cxi_without_plugin()
    wanted = (env.get("NCCL_NET_PLUGIN") or "").strip() or "libnccl-net.so"
    yield warning(f"the job spans hosts ({spread}) on HPE Slingshot ({', '.join(nics[:4])}), but no NCCL net plugin "
                  f"({wanted}) is on LD_LIBRARY_PATH: NCCL will cross the nodes over TCP sockets",
                  detail=("NCCL's built-in networks are its IB verbs transport and its socket transport (NVIDIA/nccl "
                          "src/plugin/net.cc: 'Add 2 internal ib and socket plugins'); Slingshot's CXI NICs are no "
                          "verbs device and are reached through the aws-ofi-nccl plugin and libfabric's cxi provider. "
                          "Without the plugin NCCL logs 'No plugin found' at INFO only and uses NET/Socket, at a "
                          "fraction of the fabric's bandwidth. HPE's Slingshot note for NCCL sets NCCL_NET='AWS "
                          "Libfabric' for this reason: \"" + said["sources"][1]["where"].split(": ", 1)[-1].strip("'")
                          + "\" LD_LIBRARY_PATH: " + (env.get("LD_LIBRARY_PATH") or "(unset)") + "."),
                  fix=("export LD_LIBRARY_PATH=<aws-ofi-nccl's lib directory>:$LD_LIBRARY_PATH NCCL_NET='AWS Libfabric' "
                       "FI_PROVIDER=cxi   # e.g. the site's aws-ofi-nccl module (module load aws-ofi-nccl)"),
                  subjects=["LD_LIBRARY_PATH", "NCCL_NET"] + [f"cxi:{n}" for n in nics[:4]],
                  evidence={"slingshot": nics[:8], "net_plugins": [], "why_multi_node": spread,
                            "LD_LIBRARY_PATH": env.get("LD_LIBRARY_PATH")})


def _net_forced_to_sockets(snap, rdma):
    """NET007: NCCL_NET names NCCL's socket transport on a multi-node job of a host with RDMA devices."""
    from ddpdoctor.facts import settings as catalog
    from ddpdoctor.facts.net import multi_node

    raw = (env_of(snap).get("NCCL_NET") or "").strip()
    names = (catalog.lookup("NCCL_NET") or {}).get("net_names") or []
    sockets = {str(n.get("name")).lower() for n in names if n.get("transport") == "sockets"}
    if not raw or raw.lower() not in sockets:
        return
    skipped = set(_skipped_by_nccl_ib(snap.get("pci") or {}))
    rdma = [d for d in rdma if d not in skipped]  # EFA-like devices reach NCCL only through a plugin: sockets anyway
    spread = multi_node(snap) if rdma else None
    if not spread:
        return
    shown = ", ".join(str(r) for r in rdma[:4]) + (" ..." if len(rdma) > 4 else "")
    yield warning(f"NCCL_NET={raw} on a job that spans hosts ({spread}) although this host has RDMA devices ({shown}): "
                  "NCCL crosses the nodes over TCP sockets",
                  detail=("NCCL uses only the network whose name NCCL_NET gives (strcasecmp against each net's name, "
                          "NVIDIA/nccl src/plugin/net.cc); 'Socket' is its TCP transport (src/transport/net_socket.cc), "
                          "so the InfiniBand/RoCE devices here carry nothing and gradients cross at NIC speed through "
                          "the CPU: a step can be several times slower than over IB. Often left from debugging an IB "
                          "problem, or copied from a single-node or Ethernet-only set-up."),
                  fix="unset NCCL_NET   # NCCL picks IB/RoCE itself when devices are there; if IB fails, fix "
                      "NCCL_IB_HCA / NCCL_IB_GID_INDEX / NCCL_SOCKET_IFNAME instead",
                  subjects=["NCCL_NET"],
                  evidence={"NCCL_NET": raw, "rdma_devices": list(rdma[:16]), "why_multi_node": spread})


def _torch_at_least(snap, want: tuple) -> Optional[bool]:
    raw = ((snap.get("packages") or {}).get("versions") or {}).get("torch")
    nums = [n for n in (whole_number(m) for m in re.findall(r"\d+", str(raw or "").split("+")[0])[:3]) if n is not None]
    return None if not nums else tuple(nums) >= want


@check("NET008", "rdzv-endpoint-not-recognised", family="network", needs=("env", "network"), reads=("packages", "launch"))
def rdzv_endpoint_not_recognised(snap):
    """torchrun's c10d rendezvous endpoint is this host, but torch will not recognise it as this host.

    What it checks
        With torchrun's c10d rendezvous (PET_RDZV_BACKEND=c10d, its --rdzv-backend) and no `is_host`
        in PET_RDZV_CONF: whether the endpoint's host (PET_RDZV_ENDPOINT) resolves to an address of
        this host's interfaces while torch's own test, `_matches_machine_hostname`
        (torch/distributed/elastic/rendezvous/utils.py), says it is another machine. That test takes
        `localhost`, a loopback address, the hostname itself, the canonical name (FQDN) the hostname
        resolves to, an IP address the hostname resolves to and, from torch 2.0, any address the
        endpoint and the hostname both resolve to. A second name of the host (a CNAME, a Kubernetes
        service name), or an address of a NIC the hostname does not resolve to, fails it.

    Why it matters
        The agent that matches the endpoint hosts the rendezvous TCPStore; when none matches, every
        agent connects as a client to a store nobody serves, and the job times out at rendezvous
        (RendezvousTimeoutError / RendezvousConnectionError) with nothing wrong in the network
        (pytorch/pytorch#73380: Volcano's `host.subdomain` name for a pod whose hostname is `host`).

    Example
        hostname sh-0-0 (192.168.15.246), PET_RDZV_ENDPOINT=sh-0-0.sh:29400 resolving to 192.168.15.246,
        torch 1.10.

    Fix
        torchrun --rdzv-endpoint=$(hostname):29400 ...   # the name torch compares with; or, on this
        node only, --rdzv-conf is_host=1
    """
    env = launch_env(snap)
    backend = (env.get("PET_RDZV_BACKEND") or "").strip().lower()
    if backend != "c10d" or "is_host" in (env.get("PET_RDZV_CONF") or ""):
        return
    net = snap["network"]
    endpoint = net.get("rdzv_endpoint") or {}
    host = str(endpoint.get("host") or "").strip()
    resolved = [a for a in endpoint.get("addresses") or [] if isinstance(a, str)]
    if not host or not resolved:
        return
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if host == "localhost" or (literal is not None and literal.is_loopback):
        return
    ifaces = [i for i in (net.get("interfaces") or []) if isinstance(i, dict)]
    own = {str(a.get("address")).split("%")[0] for i in ifaces for a in (i.get("addresses") or []) if a.get("address")}
    mine = [a for a in resolved if a.split("%")[0] in own and not _loopback(a)]
    if not mine:
        return  # the endpoint is another host (or unknown): this agent is right to be a client
    hostname = str(net.get("hostname") or (snap.get("host") or {}).get("hostname") or "")
    if host == hostname:
        return
    me = net.get("own_hostname") or {}
    my_addrs = [a for a in me.get("addresses") or [] if isinstance(a, str)]
    canonical = me.get("canonical")
    if canonical and canonical == host:
        return
    if literal is not None and str(literal) in my_addrs:
        return
    new_torch = _torch_at_least(snap, (2, 0))
    if new_torch is not False and set(resolved) & set(my_addrs):
        return  # torch >= 2.0 (or unknown: the benefit of the doubt) matches on shared addresses
    why = ("torch before 2.0 compares the endpoint with the hostname and its FQDN only" if new_torch is False else
           f"the hostname {hostname!r} resolves to {', '.join(my_addrs) or 'nothing'}, none of the endpoint's addresses")
    guess = "" if canonical or literal is not None else (
        " The hostname's canonical name (FQDN) was not recorded: if it is exactly the endpoint's name, torch "
        "does recognise it and this finding is wrong.")
    yield warning(f"the rendezvous endpoint {host} is this host ({', '.join(mine)}), but torch will not recognise it "
                  f"as this host: no agent will serve the c10d rendezvous store",
                  detail=f"torchrun's c10d rendezvous lets the agent whose machine matches the endpoint host the "
                         f"store (_matches_machine_hostname); {why}. So every agent, this one included, connects as a "
                         f"client to a store nobody serves, and the rendezvous times out.{guess}",
                  fix=f"torchrun --rdzv-endpoint={hostname or '$(hostname)'}:<port> ...   # or add --rdzv-conf "
                      f"is_host=1 on this node only",
                  subjects=["PET_RDZV_ENDPOINT", f"host:{host}"],
                  evidence={"endpoint": host, "endpoint_addresses": resolved, "hostname": hostname,
                            "hostname_addresses": my_addrs, "canonical": canonical,
                            "torch": ((snap.get("packages") or {}).get("versions") or {}).get("torch")})


@check("NET010", "rdma-virtual-functions-selected", family="network", needs=("env", "pci"))
def rdma_virtual_functions_selected(snap):
    """NCCL will use SR-IOV virtual functions of the HCAs beside their physical functions.

    What it checks
        The RDMA devices NCCL's IB transport will open (every device with an active port, narrowed by
        NCCL_IB_HCA's prefix matching: src/transport/net_ib/init.cc, ncclIbInit with matchIfList) that
        are SR-IOV virtual functions (/sys/class/infiniband/<dev>/device/physfn), when physical
        functions are selected too. A host (or VM) that sees only virtual functions is left alone.

    Why it matters
        NCCL takes every device it finds as a NIC of its own, with the port's full speed: a VF shares
        its PF's port, so rings and trees are laid over NICs that are one, and a VF meant for a VM or
        another pod (another pkey or VLAN) may not reach the other nodes at all. NVIDIA/nccl#1422:
        containers that saw the VFs' InfiniBand devices beside the PFs' failed until the VFs were
        disabled. NCCL_IB_HCA=mlx5_1 also selects mlx5_10..mlx5_17 (prefix match).

    Example
        /sys/class/infiniband: mlx5_0..mlx5_9 (PFs) and mlx5_10..mlx5_17 (VFs), NCCL_IB_HCA unset.

    Fix
        export NCCL_IB_HCA='=mlx5_0,mlx5_1,...'   # the PFs by exact name; or do not pass the VFs' devices in
    """
    env = env_of(snap)
    pci = snap.get("pci") or {}
    vfs = set(pci.get("rdma_virtual_functions") or [])
    if not vfs or not nccl_ib_wanted(env, pci):
        return
    ports = pci.get("rdma_ports") or {f"{d}:1": {} for d in pci.get("rdma_devices") or []}
    active = {k: p for k, p in ports.items() if "active" in str((p or {}).get("state") or "ACTIVE").lower()}
    chosen = sorted({k.partition(":")[0] for k in nccl_ib_ports(env, {"rdma_ports": active})})
    chosen_vfs = [d for d in chosen if d in vfs]
    chosen_pfs = [d for d in chosen if d not in vfs]
    if not chosen_vfs or not chosen_pfs:
        return
    spec = env.get("NCCL_IB_HCA")
    how = f"NCCL_IB_HCA={spec!r} selects" if spec else "NCCL_IB_HCA is unset, so NCCL opens"
    yield warning(f"{how} {len(chosen_vfs)} SR-IOV virtual function(s) ({', '.join(chosen_vfs[:4])}"
                  f"{', ...' if len(chosen_vfs) > 4 else ''}) beside the physical HCAs ({', '.join(chosen_pfs[:4])}"
                  f"{', ...' if len(chosen_pfs) > 4 else ''})",
                  detail=("NCCL takes each RDMA device with an active port as a NIC of its own (ncclIbInit, "
                          "src/transport/net_ib/init.cc); a virtual function shares its physical function's port and is "
                          "often set up for a VM or another pod, so jobs fail or slow down until the VFs are left out "
                          "(NVIDIA/nccl#1422). NCCL_IB_HCA matches names by prefix unless it starts with '='."),
                  fix=f"export NCCL_IB_HCA='={','.join(chosen_pfs)}'   # the physical functions, exact names",
                  subjects=["NCCL_IB_HCA"] + [f"rdma:{d}" for d in chosen_vfs[:8]],
                  env_fix={"NCCL_IB_HCA": "=" + ",".join(chosen_pfs)},
                  evidence={"virtual_functions": chosen_vfs, "physical_functions": chosen_pfs, "NCCL_IB_HCA": spec})


@check("NET013", "rdma-device-files-missing", family="network", needs=("env", "pci"), reads=("host",))
def rdma_device_files_missing(snap):
    """NCCL would use RDMA devices whose verbs device files (/dev/infiniband/uverbsN) are not here.

    What it checks
        For each RDMA device NCCL's IB transport would open (an active port, NCCL_IB_HCA's selection,
        NCCL_IB_DISABLE and NCCL_NET=Socket respected), whether the character device its sysfs entry
        names (<dev>/device/infiniband_verbs/uverbsN) exists under /dev/infiniband.

    Why it matters
        libibverbs opens /dev/infiniband/uverbsN in ibv_open_device; without it NCCL warns "Call to
        ibv_open_device failed" and "NET/IB : Unable to open device <dev>" (ncclIbInit,
        src/transport/net_ib/init.cc), finds no IB device and runs every inter-node transfer over TCP
        sockets: much slower, or a hang where the sockets cannot reach the other nodes (NVIDIA/nccl#451).
        A container sees the HCA in sysfs but gets the device files only when they are passed in.

    Example
        docker run --gpus all --network host image ...   # no --device=/dev/infiniband

    Fix
        docker run --device=/dev/infiniband --ulimit memlock=-1 ...   # Kubernetes: the RDMA device plugin's resource
    """
    env = env_of(snap)
    pci = snap.get("pci") or {}
    verbs = pci.get("rdma_verbs") or {}
    if not verbs or not nccl_ib_wanted(env, pci):
        return
    ports = pci.get("rdma_ports") or {f"{d}:1": {} for d in pci.get("rdma_devices") or []}
    active = {k: p for k, p in ports.items() if "active" in str((p or {}).get("state") or "ACTIVE").lower()}
    chosen = sorted({k.partition(":")[0] for k in nccl_ib_ports(env, {"rdma_ports": active})})
    missing = [d for d in chosen if (verbs.get(d) or {}).get("present") is False]
    if not missing:
        return
    files = [f"/dev/infiniband/{verbs[d].get('uverbs')}" for d in missing]
    every = len(missing) == len([d for d in chosen if d in verbs])
    container = (snap.get("host") or {}).get("container")
    yield warning(f"RDMA device(s) {', '.join(missing[:4])} have no device file here ({', '.join(files[:4])}): NCCL cannot "
                  f"open {'them' if len(missing) > 1 else 'it'}" + (" and falls back to TCP sockets" if every else ""),
                  detail=("libibverbs' ibv_open_device opens /dev/infiniband/uverbsN; without it NCCL logs 'Call to "
                          "ibv_open_device failed' / 'NET/IB : Unable to open device' (ncclIbInit, src/transport/net_ib/"
                          "init.cc) and " + ("uses sockets for every inter-node transfer." if every else
                                             "leaves those devices out.")
                          + (f" This runs in a {container} container, which sees the HCA in sysfs without its device "
                             "files." if container else "")),
                  fix="docker run --device=/dev/infiniband --ulimit memlock=-1 ...   # or the RDMA device plugin's "
                      "resource on Kubernetes; on bare metal: modprobe ib_uverbs",
                  subjects=[f"rdma:{d}" for d in missing[:8]] + ["path:/dev/infiniband"],
                  evidence={"missing": {d: verbs[d] for d in missing}, "container": container})


# Kernel driver of an RDMA device's PCI function -> the rdma-core provider that serves it (providers/<name>,
# PROVIDER_DRIVER(<name>, ...); linux-rdma/rdma-core 691953d8, kernel-headers/rdma/ib_user_ioctl_verbs.h
# enum rdma_driver_id). Software devices (rxe, siw) have no PCI driver and are left out.
VERBS_PROVIDER_OF_DRIVER = {
    "mlx5_core": "mlx5", "mlx4_core": "mlx4", "cxgb4": "cxgb4", "ib_mthca": "mthca", "bnxt_en": "bnxt_re",
    "be2net": "ocrdma", "ice": "irdma", "i40e": "irdma", "irdma": "irdma", "vmw_pvrdma": "vmw_pvrdma",
    "qede": "qedr", "hns3": "hns", "efa": "efa", "erdma": "erdma", "mana": "mana", "hfi1": "hfi1verbs",
    "ib_qib": "ipathverbs", "ionic": "ionic",
}


# NVIDIA/nccl src/misc/ibvsymbols.cc@d97a32fac84f (buildIbvSymbols): dlopen("libibverbs.so"), then
# dlopen("libibverbs.so.1"); when both fail it logs "Failed to open libibverbs.so[.1]" and the IB transport
# does not initialise, so NCCL's net init takes the socket transport.
IBV_DLOPEN_SOURCE = "NVIDIA/nccl src/misc/ibvsymbols.cc@d97a32fac84f (buildIbvSymbols)"


def _libibverbs_absent(snap, env, pci):
    """RDMA devices NCCL would use, and no libibverbs.so[.1] anywhere the dynamic loader looks (LD_LIBRARY_PATH,
    the ld.so.conf directories, the default library directories): NCCL cannot load verbs at all."""
    from ddpdoctor.facts.net import multi_node

    devices = [d for d in pci.get("rdma_devices") or []][:8]
    launcher = snap.get("launcher") or {}
    lw, w = launcher.get("local_world_size"), launcher.get("world_size")
    one_node = not multi_node(snap) and ((launcher.get("nnodes") == 1) or (lw and w and lw == w))
    container = (snap.get("host") or {}).get("container")
    make = info if one_node else warning
    yield make(f"this environment has no libibverbs: NCCL cannot open the RDMA device(s) {', '.join(devices[:4])} and "
               "will run inter-node traffic over TCP sockets",
               detail=("NCCL loads verbs at run time: dlopen('libibverbs.so'), then 'libibverbs.so.1'; when neither loads it "
                       f"logs 'Failed to open libibverbs.so[.1]' and its IB transport does not start ({IBV_DLOPEN_SOURCE}), "
                       "so every byte between nodes goes over its socket transport (sgl-project/sglang#1427: an image "
                       "without libibverbs on an InfiniBand cluster; installing it sped up multi-node serving). "
                       "No libibverbs.so* was found in LD_LIBRARY_PATH, the ld.so.conf directories or the default "
                       "library directories." + (f" This runs in a {container} container, whose image lacks it." if container else "")
                       + (" The job here is on one node, where NCCL does not need the network: a note." if one_node else "")),
               fix="apt-get install -y libibverbs1 ibverbs-providers   # RHEL: dnf install rdma-core; in the image for a container",
               subjects=[f"rdma:{d}" for d in devices] + ["lib:libibverbs"],
               evidence={"rdma_devices": devices, "verbs_providers": pci.get("verbs_providers"), "container": container})


@check("NET014", "verbs-provider-missing", family="network", needs=("env", "pci"), reads=("host",))
def verbs_provider_missing(snap):
    """NCCL would use RDMA devices for which this environment's libibverbs has no userspace provider.

    What it checks
        For each RDMA device NCCL's IB transport would open (NCCL_IB_DISABLE, NCCL_NET=Socket and
        NCCL_IB_HCA respected), the rdma-core provider its kernel driver needs (mlx5_core -> mlx5, efa -> efa,
        bnxt_en -> bnxt_re, ...) against the providers installed where a libibverbs.so.1 was found:
        lib<name>-rdmav<ABI>.so, and, where /etc/libibverbs.d exists, its `driver <name>` line. With RDMA
        devices and no libibverbs.so at all where the dynamic loader looks (LD_LIBRARY_PATH, the
        ld.so.conf directories, the default directories), NCCL cannot load verbs: reported too.

    Why it matters
        libibverbs matches each /sys/class/infiniband_verbs/uverbsN against the providers it loads
        (rdma-core libibverbs/dynamic_driver.c reads /etc/libibverbs.d/*.driver, then lib<name>-rdmav*.so);
        without one it prints "libibverbs: Warning: no userspace device-specific driver found for
        /sys/class/infiniband_verbs/uverbs0" and lists no device. NCCL then finds no IB device: older versions
        stop with "internal error", newer ones fall back to TCP sockets (NVIDIA/nccl-tests#41: a Singularity
        image without libmlx5). Containers built without rdma-core's providers are the usual cause.

    Example
        A container image with libibverbs1 but not the ibverbs-providers package, on a host with mlx5 HCAs.

    Fix
        Install the providers in the image (Debian/Ubuntu: apt-get install ibverbs-providers; RHEL: dnf install
        rdma-core; MLNX_OFED images: libmlx5); check with ibv_devinfo, which must list the HCA.
    """
    from ddpdoctor.facts.net import nccl_ib_ports, nccl_ib_wanted

    env = env_of(snap)
    pci = snap.get("pci") or {}
    have = pci.get("verbs_providers")
    drivers = pci.get("rdma_drivers") or {}
    if isinstance(have, dict) and have.get("libibverbs") == [] and have.get("ld_so_conf") is True \
            and nccl_ib_wanted(env, pci) and not [p for p in pci.get("net_plugins") or [] if p]:
        yield from _libibverbs_absent(snap, env, pci)
        return
    if not isinstance(have, dict) or not have.get("libibverbs") or not drivers or not nccl_ib_wanted(env, pci):
        return
    ports = pci.get("rdma_ports") or {f"{d}:1": {} for d in pci.get("rdma_devices") or []}
    chosen = sorted({k.partition(":")[0] for k in nccl_ib_ports(env, {"rdma_ports": ports})})
    libraries, config = set(have.get("libraries") or []), have.get("config")
    missing: dict = {}
    for dev in chosen:
        want = VERBS_PROVIDER_OF_DRIVER.get(str(drivers.get(dev) or ""))
        if not want:
            continue
        lacks = ([f"lib{want}-rdmav*.so"] if want not in libraries else []) + \
                ([f"'driver {want}' in /etc/libibverbs.d"] if isinstance(config, list) and want not in config else [])
        if lacks:
            missing[dev] = {"driver": drivers.get(dev), "provider": want, "lacks": lacks}
    if not missing:
        return
    every = len(missing) == len([d for d in chosen if VERBS_PROVIDER_OF_DRIVER.get(str(drivers.get(d) or ""))])
    provs = sorted({m["provider"] for m in missing.values()})
    container = (snap.get("host") or {}).get("container")
    yield warning(f"RDMA device(s) {', '.join(list(missing)[:4])} need the libibverbs provider {', '.join(provs)}, which "
                  "this environment lacks: libibverbs will list " + ("no device" if every else "fewer devices")
                  + " and NCCL's IB transport " + ("finds none" if every else "leaves them out"),
                  detail=("libibverbs matches each uverbs device against the providers it loads (rdma-core "
                          "libibverbs/dynamic_driver.c: /etc/libibverbs.d/*.driver, lib<name>-rdmav*.so); without one it "
                          "warns 'no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbsN', and "
                          "NCCL reports 'NET/IB : No device found', then stops with 'internal error' (older NCCL) or runs "
                          "inter-node traffic over TCP sockets (NVIDIA/nccl-tests#41). Missing: "
                          + "; ".join(f"{d} ({m['driver']}): {', '.join(m['lacks'])}" for d, m in list(missing.items())[:4])
                          + f". libibverbs found in {', '.join(have.get('libibverbs')[:3])}."
                          + (f" This runs in a {container} container." if container else "")),
                  fix="apt-get install -y ibverbs-providers   # RHEL: dnf install rdma-core; then ibv_devinfo must list "
                      "the HCA",
                  subjects=[f"rdma:{d}" for d in list(missing)[:8]] + [f"verbs-provider:{p}" for p in provs],
                  evidence={"missing": missing, "verbs_providers": have, "container": container})


IPV4_LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")  # RFC 3927: never forwarded by routers


def _ipv4_of_gid(gid: str) -> Optional[ipaddress.IPv4Address]:
    """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d, as /sys/class/infiniband writes it), else None."""
    g = str(gid or "").lower().replace(":", "")
    if len(g) != 32 or not g.startswith("0" * 20 + "ffff"):
        return None
    return ipaddress.IPv4Address(int(g[24:], 16))


def _nccl_auto_gid(port: dict, env) -> Optional[str]:
    """The GID index NCCL picks on a RoCE port when NCCL_IB_GID_INDEX is unset (src/transport/net_ib/connect.cc
    ncclIbGetGidIndex / ncclUpdateGidIndex @ 5067397c): walking the table upwards it moves to the first GID of the
    wanted family (NCCL_IB_ADDR_FAMILY, AF_INET by default) and RoCE version (NCCL_IB_ROCE_VERSION_NUM, 2) inside
    NCCL_IB_ADDR_RANGE; later ones of the same family and version do not replace it. None when no GID qualifies
    or the wanted family is IPv6 (not judged here)."""
    if (env.get("NCCL_IB_ADDR_FAMILY") or "AF_INET").strip().upper() != "AF_INET":
        return None
    want_v = (env.get("NCCL_IB_ROCE_VERSION_NUM") or "2").strip()
    rng = None
    if (env.get("NCCL_IB_ADDR_RANGE") or "").strip():
        try:
            rng = ipaddress.ip_network(env["NCCL_IB_ADDR_RANGE"].strip(), strict=False)
        except ValueError:
            rng = None
    gids = port.get("gids") or {}
    for idx in sorted(gids, key=lambda i: int(i) if str(i).isdigit() else 1 << 30):
        entry = gids[idx] or {}
        addr = _ipv4_of_gid(entry.get("gid"))
        if addr is None or f"v{want_v}" not in str(entry.get("type") or "").lower().replace(" ", ""):
            continue
        if rng is not None and (rng.version != 4 or addr not in rng):
            continue
        return str(idx)
    return None


@check("NET017", "rdma-gid-ipv4-link-local", family="network", needs=("env", "pci"))
def rdma_gid_ipv4_link_local(snap):
    """On a job across hosts NCCL will use a RoCE port whose IPv4 address is link-local (169.254/16).

    What it checks
        Each ACTIVE RoCE port NCCL selects (NCCL_IB_HCA, else every port: src/transport/net_ib/init.cc
        skips only ports that are not IBV_PORT_ACTIVE) and the GID NCCL will use on it: NCCL_IB_GID_INDEX
        when set, else the one ncclIbGetGidIndex picks (src/transport/net_ib/connect.cc @ 5067397c: the
        first IPv4-mapped RoCE v2 GID). Whether that GID carries an IPv4 link-local address.

    Why it matters
        NCCL's own GID filter rejects only IPv6 link-local GIDs (connect.cc linkLocalGid: fe80::/64), so a
        port holding a 169.254.x.x autoconfiguration address still becomes an NCCL device; routers never
        forward 169.254/16 (RFC 3927), so queue pairs to another host time out at init ("ibv_modify_qp
        failed with 110 Connection timed out", getainode/ainode#89, where NCCL_IB_HCA named such a port
        beside the cluster port). NCCL uses every selected port and pairs them across hosts.

    Example
        NCCL_IB_HCA=roceP2p1s0f0,roceP2p1s0f1 on two hosts, roceP2p1s0f0 carrying 169.254.3.7.

    Fix
        Name only the ports on the cluster network in NCCL_IB_HCA (e.g. `=roceP2p1s0f1`), or give the port a
        routable address; NCCL_IB_ADDR_RANGE=<cluster subnet> also steers NCCL's GID choice.
    """
    env = env_of(snap)
    pci = snap.get("pci") or {}
    if not nccl_ib_wanted(env, pci) or not pci.get("rdma_ports") or not multi_node(snap):
        return
    forced = (env.get("NCCL_IB_GID_INDEX") or "").strip()
    bad = {}
    for key, port in nccl_ib_ports(env, pci).items():
        if str(port.get("link_layer") or "").lower() != "ethernet":
            continue
        if "active" not in str(port.get("state") or "ACTIVE").lower():
            continue
        idx = forced if forced.lstrip("-").isdigit() and int(forced) >= 0 else _nccl_auto_gid(port, env)
        entry = (port.get("gids") or {}).get(idx or "") or {}
        addr = _ipv4_of_gid(entry.get("gid"))
        if addr is not None and addr in IPV4_LINK_LOCAL:
            bad[key] = (idx, str(addr))
    if not bad:
        return
    names = ", ".join(f"{k} ({a}, GID {i})" for k, (i, a) in sorted(bad.items())[:4])
    yield warning(f"NCCL will use RoCE port(s) with a link-local IPv4 address on a job across hosts: {names}",
                  detail=("169.254/16 addresses are never routed (RFC 3927), so queue pairs from this port to other hosts "
                          "time out ('ibv_modify_qp failed with 110 Connection timed out'). NCCL skips only IPv6 "
                          "link-local GIDs (src/transport/net_ib/connect.cc linkLocalGid) and uses every active port "
                          "NCCL_IB_HCA selects."),
                  fix=("export NCCL_IB_HCA='=<the ports on the cluster network>'   # leave out "
                       + ", ".join(k.split(":")[0] for k in sorted(bad)[:4])),
                  subjects=["NCCL_IB_HCA"] + [f"rdma:{k}" for k in sorted(bad)[:8]],
                  evidence={"ports": {k: {"gid_index": i, "ipv4": a} for k, (i, a) in bad.items()},
                            "NCCL_IB_HCA": env.get("NCCL_IB_HCA"), "why_multi_node": multi_node(snap)})


# rdma-core's predictable names (kernel-boot/rdma_rename.c): ib* InfiniBand, roce* RoCE, iw* iWARP, and "rdma" for a
# link layer that is none of them, which is what EFA's driver reports (efa_port_link_layer: IB_LINK_LAYER_UNSPECIFIED)
_UNSPECIFIED_LINK_NAME = re.compile(r"^(rdmap\d+s\d+|efa_?\d+)$")


def _skipped_by_nccl_ib(pci: dict) -> list:
    """RDMA devices NCCL's built-in IB transport does not use: their ports' link layer is neither InfiniBand nor
    Ethernet (NVIDIA/nccl src/transport/net_ib/init.cc @5067397c skips such ports), as EFA's are. Known from the
    device's kernel driver (efa), its ports' link_layer, or, when neither was recorded, rdma-core's name for it."""
    drivers = pci.get("rdma_drivers") or {}
    ports = pci.get("rdma_ports") or {}
    out = []
    for dev in pci.get("rdma_devices") or []:
        layers = {str((p or {}).get("link_layer") or "") for k, p in ports.items() if k.split(":")[0] == dev}
        layers.discard("")
        if drivers.get(dev) == "efa":
            out.append(dev)
        elif layers:
            if not layers & {"InfiniBand", "Ethernet"}:
                out.append(dev)
        elif not drivers.get(dev) and _UNSPECIFIED_LINK_NAME.match(str(dev)):
            out.append(dev)
    return out


def _rdma_ports_down(snap):
    """NET007's third case: on a job across hosts, every RDMA port NCCL would select (NCCL_IB_HCA, else all of them)
    is known and not ACTIVE. NCCL's IB transport skips a port whose state is not IBV_PORT_ACTIVE (NVIDIA/nccl
    src/transport/net_ib/init.cc @5067397c: `if (portAttr.state != IBV_PORT_ACTIVE) continue;`), finds no device and
    uses sockets on this host, while hosts whose ports are up use IB: NVIDIA/nccl-tests#188 ("socketFinalizeAccept:
    wrong type 4 != 3"; the maintainer: make the InfiniBand setup work on both nodes, or NCCL_IB_DISABLE=1)."""
    env = env_of(snap)
    pci = snap.get("pci") or {}
    if not nccl_ib_wanted(env, pci) or [p for p in pci.get("net_plugins") or [] if p]:
        return
    spread = multi_node(snap)
    chosen = nccl_ib_ports(env, pci)
    if not spread or not chosen:
        return
    states = {k: str((p or {}).get("state") or "") for k, p in chosen.items()}
    if any(not st or "active" in st.lower() for st in states.values()):
        return  # a port NCCL can use, or one whose state was not read
    yield warning(
        f"the job spans hosts ({spread}) but no RDMA port NCCL would use here is ACTIVE: "
        + ", ".join(f"{k} {st}" for k, st in sorted(states.items())),
        detail=("NCCL's IB transport skips every port that is not ACTIVE (src/transport/net_ib/init.cc), so on this "
                "host it finds no IB device and falls back to TCP sockets. Hosts whose ports are up use IB, and NCCL's "
                "connections between the two kinds fail (NVIDIA/nccl-tests#188: 'socketFinalizeAccept: wrong type 4 != "
                "3'); if every host is like this one, the job runs over sockets."),
        fix=("ibstat; fix the link (cable, subnet manager: opensm, switch port) until the port is ACTIVE on every host, "
             "or export NCCL_IB_DISABLE=1 on every host to use sockets everywhere"),
        subjects=[f"rdma:{k}" for k in sorted(states)],
        evidence={"why_multi_node": spread, "ports": states})


def _rdma_needs_net_plugin(snap):
    """NET007's second case: this host's RDMA devices (EFA) are ones NCCL reaches only through a network plugin, and
    none is found.

        On a job across hosts: RDMA devices whose ports' link layer is neither InfiniBand nor Ethernet
        (AWS EFA: driver efa, named rdmap<bus>s<slot>) against the NCCL net plugins this process's NCCL
        would load (libnccl-net.so, or the one NCCL_NET_PLUGIN names, on LD_LIBRARY_PATH). Quiet when
        NCCL_NET / NCCL_NET_PLUGIN ask for sockets or no plugin.

    Why it matters
        NCCL's own IB transport skips ports whose link layer is not InfiniBand or Ethernet (NVIDIA/nccl
        src/transport/net_ib/init.cc): EFA is used only through the aws-ofi-nccl plugin. When the plugin
        is not on the loader's path NCCL logs "NET/Plugin : No plugin found (libnccl-net.so), using
        internal implementation" at INFO and sends all inter-node traffic over TCP sockets, at a few
        Gb/s instead of 100-400 Gb/s per NIC (NVIDIA-NeMo/RL#1973: an NGC container's LD_LIBRARY_PATH
        without /opt/amazon/aws-ofi-nccl/lib; aws/aws-parallelcluster#6942 after the plugin moved).

    Example
        A P5 node in a container whose LD_LIBRARY_PATH lacks /opt/amazon/ofi-nccl/lib.

    Fix
        export LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:$LD_LIBRARY_PATH   # where the
        plugin is installed (older installs: /opt/amazon/aws-ofi-nccl/lib, /opt/aws-ofi-nccl/lib)
    """
    from ddpdoctor.facts.net import multi_node

    pci = snap.get("pci") or {}
    if pci.get("unavailable") or pci.get("net_plugins") is None:
        return  # not gathered: whether a plugin is there is unknown
    if [p for p in pci.get("net_plugins") or [] if p]:
        return
    env = env_of(snap)
    if (env.get("NCCL_NET") or "").strip().lower() == "socket" or (env.get("NCCL_NET_PLUGIN") or "").strip().lower() == "none":
        return  # sockets asked for
    skipped = _skipped_by_nccl_ib(pci)
    spread = multi_node(snap)
    if not skipped or len(skipped) < len(pci.get("rdma_devices") or []) or not spread:
        return  # some device NCCL's IB transport does use: NCCL004/NET014 judge those
    wanted = (env.get("NCCL_NET_PLUGIN") or "").strip() or "libnccl-net.so"
    yield warning(f"the job spans hosts ({spread}) and this host's RDMA devices ({', '.join(skipped[:4])}) are EFA-like, "
                  f"which NCCL uses only through a net plugin, but no {wanted} is on LD_LIBRARY_PATH: NCCL will cross "
                  "hosts over TCP sockets",
                  detail=("NCCL's built-in IB transport skips ports whose link layer is neither InfiniBand nor Ethernet "
                          "(NVIDIA/nccl src/transport/net_ib/init.cc); EFA is reached through the aws-ofi-nccl plugin, "
                          "which NCCL dlopens by name (src/plugin/net.cc). Without it NCCL logs 'No plugin found "
                          "(libnccl-net.so), using internal implementation' only at INFO and uses NET/Socket. "
                          f"LD_LIBRARY_PATH: {env.get('LD_LIBRARY_PATH') or '(unset)'}."),
                  fix=("export LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:$LD_LIBRARY_PATH   # the "
                       "plugin's directory on this image (older: /opt/amazon/aws-ofi-nccl/lib)"),
                  subjects=["LD_LIBRARY_PATH"] + [f"rdma:{d}" for d in skipped[:4]],
                  evidence={"devices": skipped, "net_plugins": [], "why_multi_node": spread,
                            "LD_LIBRARY_PATH": env.get("LD_LIBRARY_PATH")})


def _is_this_host(name: str, net: dict, local: set) -> bool:
    own = str(net.get("hostname") or "")
    return name in local or name in ("localhost", own, own.split(".")[0]) or (bool(own) and name.split(".")[0] == own.split(".")[0])


@check("NET018", "deepspeed-master-first-address", family="network", needs=("packages", "host", "network"),
       reads=("env", "launch"))
def deepspeed_master_first_address(snap):
    """DeepSpeed's runner will take the first address `hostname -I` prints as the master, on a host with several.

    What it checks
        With deepspeed installed and a hostfile of two hosts or more whose first host is this one:
        the addresses `hostname -I` prints here (IPv4 of the interfaces that are up, in the kernel's
        order, then IPv6 but link-local; loopback left out). When there are several, the first is
        the master address. Warns when the other hosts of the hostfile (those written as IPv4
        addresses) share a subnet with another of this host's addresses and not with the first, when
        MASTER_ADDR here names another of this host's addresses, or when the first is on a virtual
        interface (a bridge, veth, docker, libvirt, tunnel, or link-local only) while a real NIC has an
        address; otherwise a note names the address it will take.

    Why it matters
        Without --master_addr, deepspeed/launcher/runner.py (@2d991ba3, main()) runs `ssh <first host>
        hostname -I` and keeps `.split()[0]`; it ignores MASTER_ADDR and accelerate's
        main_process_ip. On a multi-homed host that is whichever interface the kernel lists first,
        often a management or libvirt network the other nodes cannot reach: the other ranks cannot
        connect to the store and the first collective fails or hangs (deepspeedai/DeepSpeed#5136:
        192.168.121.122 was taken instead of 192.168.10.161).

    Example
        Hostfile `10.1.0.11 slots=8` / `10.1.0.12 slots=8`, this host 10.1.0.11 on eth1 and
        192.168.121.122 on eth0 (listed first).

    Fix
        deepspeed --master_addr <this host's address on the nodes' network> --hostfile ...   # accelerate:
        pass it through the DeepSpeed launcher's own --master_addr
    """
    from ddpdoctor.facts import net as netfacts

    if not (snap["packages"].get("versions") or {}).get("deepspeed"):
        return
    hostfile = deepspeed_hostfile_of(snap) or {}
    hosts = list(hostfile.get("hosts") or {})
    net = snap["network"]
    ifaces = net.get("interfaces") or []
    printed = netfacts.hostname_i(ifaces)
    local = {a for i in ifaces for a, _ in netfacts.v4(i)} | {a for i in ifaces for a in netfacts.v6(i)}
    if len(hosts) < 2 or not _is_this_host(hosts[0], net, local):
        return  # one host launches locally; another first host's interfaces are not in this snapshot
    addrs = list(dict.fromkeys(a for a, _ in printed))
    if len(addrs) < 2:
        return
    first, first_if = printed[0]
    by_name = {i.get("name"): i for i in ifaces}
    peers = []
    for h in hosts[1:]:
        try:
            if ipaddress.ip_address(h).version == 4:
                peers.append(h)
        except ValueError:
            continue
    reach = [(a, n) for a, n in printed if peers and any(netfacts.same_subnet({"addresses": [
        x for x in (by_name.get(n) or {}).get("addresses") or [] if x.get("address") == a]}, p) for p in peers)]
    if first in [a for a, _ in reach]:
        return  # the first address is on the network the other hosts share
    master = (env_of(snap).get("MASTER_ADDR") or "").strip()
    why = None
    if reach and first not in [a for a, _ in reach]:
        want, want_if = reach[0]
        why = f"the hostfile's other hosts ({', '.join(peers[:4])}) are on {want_if}'s network ({want}), not {first_if}'s"
    elif master and master in local and master != first:
        want, want_if = master, next((n for a, n in printed if a == master), "?")
        why = f"MASTER_ADDR here is {master} ({want_if}), which the runner does not read"
    elif netfacts.is_virtual(by_name.get(first_if) or {}) and any(
            not netfacts.is_virtual(by_name.get(n) or {}) for _, n in printed):
        want, want_if = next((a, n) for a, n in printed if not netfacts.is_virtual(by_name.get(n) or {}))
        why = f"{first_if} is a virtual interface; {want_if} ({want}) is a real NIC"
    evidence = {"hostname_I": addrs[:8], "first": first, "interface": first_if, "hosts": hosts[:8]}
    detail = ("deepspeed/launcher/runner.py, without --master_addr, runs `ssh <first host> hostname -I` and keeps the "
              "first word; MASTER_ADDR and accelerate's main_process_ip do not change it (deepspeedai/DeepSpeed#5136). "
              f"`hostname -I` here: {' '.join(addrs[:6])}.")
    if why:
        yield warning(f"DeepSpeed's runner would take {first} ({first_if}, the first of `hostname -I`) as the master "
                      f"address for {len(hosts)} hosts, but {why}",
                      detail=detail,
                      fix=f"deepspeed --master_addr {want} --hostfile {hostfile.get('path') or 'hostfile'} ...",
                      subjects=["pkg:deepspeed", f"iface:{first_if}", f"iface:{want_if}"], evidence=evidence)
    else:
        yield info(f"DeepSpeed's runner will take {first} ({first_if}, the first of {len(addrs)} addresses `hostname "
                   f"-I` prints) as the master address for {len(hosts)} hosts; the others must reach it",
                   detail=detail,
                   fix="pass --master_addr <this host's address on the nodes' network> if that is not it",
                   subjects=["pkg:deepspeed", f"iface:{first_if}"], evidence=evidence)


@check("NET019", "rdma-link-errors", family="network", needs=("env", "pci"))
def rdma_link_errors(snap):
    """An RDMA port NCCL would use has gone down, or fallen into error, since its counters were last reset.

    What it checks
        For the RDMA ports NCCL's IB transport would select (NCCL_IB_HCA, else all; not when NCCL_IB_DISABLE or
        NCCL_NET=Socket), the port's link_downed and link_error_recovery counters
        (/sys/class/infiniband/<dev>/ports/<n>/counters, readable without root; prometheus/node_exporter
        collector/infiniband_linux.go @af65f85c exports the same files). A port that went down is a warning on a
        job across hosts (IB carries its inter-node traffic) and a note otherwise; recoveries alone are a note.

    Why it matters
        A port reads ACTIVE between its drops, so a flapping link (a loose or failing cable, a bad switch port)
        passes every state check; NCCL meets it as "NET/IB : Got async event : port error" and completion error
        12 (a timeout) in the middle of training, and the job hangs (NVIDIA/nccl#905: the NCCL developer read the
        log as a flapping link: check the cables, ibqueryerrors). The counters keep the history the state hides.

    Example
        mlx5_0 port 1 ACTIVE with link_downed 7 on a 2-node job.

    Fix
        ibqueryerrors; reseat or replace the cable or the switch port; perfquery -R to reset the counters and watch
        whether they climb again; NCCL_IB_HCA=^<port> to leave the port out meanwhile
    """
    env = env_of(snap)
    pci = snap["pci"]
    if not nccl_ib_wanted(env, pci):
        return
    downs, recovered = {}, {}
    for key, port in sorted(nccl_ib_ports(env, pci).items()):
        counters = (port or {}).get("counters") or {}
        if counters.get("link_downed"):
            downs[key] = counters["link_downed"]
        elif counters.get("link_error_recovery"):
            recovered[key] = counters["link_error_recovery"]
    if not downs and not recovered:
        return
    spread = multi_node(snap)
    if downs:
        listed = ", ".join(f"{k} {n} time{'s' if n != 1 else ''}" for k, n in downs.items())
        sev = warning if spread else info
        yield sev(f"RDMA port{'s' if len(downs) > 1 else ''} NCCL would use went down since the counters were last "
                  f"reset: {listed}" + (f" (the job spans hosts: {spread})" if spread else ""),
                  detail=("link_downed counts the times the link failed to recover from an error and went down; the "
                          "port can read ACTIVE now and still flap. NCCL sees a drop as 'NET/IB : Got async event : "
                          "port error' and completion error 12, and the job hangs or fails (NVIDIA/nccl#905)."),
                  fix=("ibqueryerrors; reseat or replace the cable or switch port, perfquery -R and watch the counter; "
                       "meanwhile export NCCL_IB_HCA=^" + ",".join(k.split(":")[0] for k in downs)),
                  subjects=[f"rdma:{k}" for k in downs], evidence={"link_downed": downs, "why_multi_node": spread})
    if recovered:
        listed = ", ".join(f"{k} {n}" for k, n in recovered.items())
        yield info(f"RDMA port link error recoveries since the counters were last reset: {listed}",
                   detail="link_error_recovery counts errors the link recovered from without going down: a marginal "
                          "cable or port; NCCL is not affected until the link drops.",
                   fix="ibqueryerrors; perfquery -R and watch whether the counter climbs",
                   subjects=[f"rdma:{k}" for k in recovered], evidence={"link_error_recovery": recovered})


def _v4_networks(iface: dict) -> list:
    """(address, network) of the interface's IPv4 addresses whose netmask was recorded (no guessed prefix)."""
    from ddpdoctor.facts import net as netfacts

    out = []
    for addr, mask in netfacts.v4(iface):
        if not mask:
            continue
        net = netfacts.network_of(addr, mask)
        if net is not None and not net.is_loopback and not net.is_link_local:
            out.append((addr, net))
    return out


@check("NET020", "interfaces-share-subnet", family="network", needs=("env", "network"), reads=("launch",))
def interfaces_share_subnet(snap):
    """Two of this host's network interfaces are in one IPv4 subnet, in a job that spans hosts.

    What it checks
        The up, non-virtual interfaces with an IPv4 address and a recorded netmask: two whose networks
        overlap (eno1 192.168.3.14/20 and enp37s0f0 192.168.5.14/20 are both in 192.168.0.0/20), in a job
        that spans hosts. A warning when NCCL_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) picks one of them and
        not the other; a note when neither variable chooses.

    Why it matters
        NCCL_SOCKET_IFNAME chooses the address NCCL listens on and advertises, but the kernel picks the way
        out of a connection from the routing table: with two routes to the same destination network, the
        first one wins, and which is first depends on the order the interfaces came up, which can differ
        from node to node. NCCL then receives on the chosen NIC and sends over the other, and a 10 GbE job
        runs at the speed of its 1 GbE port (NVIDIA/nccl#1581: the NCCL maintainer read two entries for
        192.168.0.0/20 in the routing table; "the most robust fix is to change the netmasks ... from /20
        to /24", or raise the metric of the other route). Two NICs in one subnet also answer each other's
        ARP requests (ARP flux, NVIDIA/nccl#1269).

    Example
        eno1 192.168.3.14/20 (1 GbE) and enp37s0f0 192.168.5.14/20 (10 GbE), NCCL_SOCKET_IFNAME=enp37s0f0,
        two nodes.

    Fix
        Put the NICs in different subnets (netmask /24 on both), or give the unwanted route a higher metric
        (`ip route`), on every node; `ip route get <peer address>` shows the NIC the kernel will use.
    """
    spread = multi_node(snap)
    if not spread:
        return
    env = env_of(snap)
    ifaces = [i for i in (snap["network"].get("interfaces") or []) if isinstance(i, dict) and i.get("up")
              and not _is_loopback_iface(i) and not str(i.get("name", "")).startswith(_VIRTUAL)]
    nets = [(i["name"], addr, net) for i in ifaces if i.get("name") for addr, net in _v4_networks(i)]
    pairs = [(a, b) for k, a in enumerate(nets) for b in nets[k + 1:] if a[0] != b[0] and a[2].overlaps(b[2])]
    if not pairs:
        return
    names = [i["name"] for i in ifaces]
    var, spec = next(((v, env.get(v)) for v in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if env.get(v)), (None, None))
    chosen = set()
    if var == "NCCL_SOCKET_IFNAME":
        chosen = set(nccl_ifname_match(spec, names)[0])
    elif var == "GLOO_SOCKET_IFNAME":
        chosen = set(gloo_ifname_match(spec, names)[0])
    split = [(a, b) for a, b in pairs if (a[0] in chosen) != (b[0] in chosen)]
    a, b = (split or pairs)[0]
    if split and a[0] not in chosen:
        a, b = b, a
    wide = a[2] if a[2].prefixlen <= b[2].prefixlen else b[2]
    what = (f"{var}={spec} picks {a[0]} ({a[1]}/{a[2].prefixlen}), but {b[0]} ({b[1]}/{b[2].prefixlen}) is in the same "
            f"network {wide}" if split else
            f"{a[0]} ({a[1]}/{a[2].prefixlen}) and {b[0]} ({b[1]}/{b[2].prefixlen}) are in the same network {wide}")
    make = warning if split else info
    yield make(what + f": the kernel may send this job's traffic to the other hosts through {b[0]}",
               detail=(f"The job spans hosts ({spread}). The interface variable sets the address NCCL and Gloo listen on; "
                       "the way out of each connection is the routing table's, and with two routes to one network the "
                       "first wins, in an order that can differ from node to node: NCCL receives on one NIC and sends on "
                       "the other (NVIDIA/nccl#1581, where the 1 GbE port carried a 10 GbE job's sends)."),
               fix=(f"give {a[0]} and {b[0]} different subnets (e.g. netmask /24 on both) or a higher metric on "
                    f"{b[0]}'s route, on every node; check with `ip route get <peer address>`"),
               subjects=[f"iface:{a[0]}", f"iface:{b[0]}"] + ([var] if var else []),
               evidence={"pairs": [{"a": x[0], "a_address": x[1], "b": y[0], "b_address": y[1], "network": str(x[2])}
                                   for x, y in pairs[:4]], "chosen_by": var, "why_multi_node": spread})


@check("NET021", "efa-settings-the-plugin-advises-against", family="network", needs=("env", "pci"))
def efa_settings_the_plugin_advises_against(snap):
    """On a host with AWS EFA devices, a variable aws-ofi-nccl's EFA cheatsheet says not to use, or not to need.

    What it checks
        With EFA devices here (RDMA devices whose ports' link layer is neither InfiniBand nor
        Ethernet, kernel driver efa): each set variable a row of the plugin's own document
        (aws/aws-ofi-nccl doc/efa-env-var.md; ddpdoctor/data/efa_settings.json) is about. RDMAV_*
        (RDMAV_FORK_SAFE): a warning, the document says do not use. The rest (FI_EFA_USE_DEVICE_RDMA=1,
        FI_EFA_FORK_SAFE=1, FI_PROVIDER=efa and NCCL_PROTO=simple, needed only by plugin releases up to
        1.5/1.6; NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD, not applicable; NCCL_MIN_CHANNELS /
        NCCL_BUFFSIZE, best left to the default): one note.

    Why it matters
        RDMAV_FORK_SAFE=1 is rdma-core's fork protection, not libfabric's: it "looks the same" as
        FI_EFA_FORK_SAFE but behaves differently and "can break things" on newer kernels. The others
        are settings copied from old recipes: NCCL_PROTO=simple keeps NCCL off its LL/LL128
        protocols on every collective, and a raised NCCL_MIN_CHANNELS splits messages until EFA
        starves for data.

    Example
        RDMAV_FORK_SAFE=1 NCCL_PROTO=simple FI_PROVIDER=efa on a p5.48xlarge.

    Fix
        unset RDMAV_FORK_SAFE (and the variables of the note, unless the plugin is older than 1.7)
    """
    from ddpdoctor.facts.net import efa_advice  # noqa: PLC0415

    pci = snap.get("pci") or {}
    if pci.get("unavailable"):
        return
    drivers = pci.get("rdma_drivers") or {}
    efa = [d for d in _skipped_by_nccl_ib(pci) if drivers.get(d) in ("efa", None)]
    if not efa:
        return
    advice = efa_advice(env_of(snap))
    harmful = [(n, v, r) for n, v, r in advice if r["verdict"] == "harmful"]
    unneeded = [(n, v, r) for n, v, r in advice if r["verdict"] != "harmful"]
    where = "aws/aws-ofi-nccl doc/efa-env-var.md"
    for name, value, row in harmful[:4]:
        yield warning(f"{name}={value} is set on a host with EFA devices ({', '.join(efa[:4])}): the aws-ofi-nccl "
                      "EFA cheatsheet says not to use it",
                      detail=f"{where}: \"{row['says']}\"",
                      fix=f"unset {name}   # FI_EFA_FORK_SAFE is libfabric's setting, and recent plugins set it themselves",
                      subjects=[name] + [f"rdma:{d}" for d in efa[:4]],
                      evidence={name: value, "devices": efa[:8]})
    if unneeded:
        names = [f"{n}={v}" for n, v, _ in unneeded]
        yield info(f"{', '.join(names[:6])}{' ...' if len(names) > 6 else ''}: settings the aws-ofi-nccl EFA cheatsheet "
                   "says are not needed on EFA with current releases",
                   detail=" ".join(f"{n}: \"{r['says']}\"" for n, _, r in unneeded[:8])
                   + f" ({where}; check does not know the plugin's release, so these are left to you.)",
                   fix="unset " + " ".join(n for n, _, _ in unneeded[:8]) + "   # unless aws-ofi-nccl here is older than 1.7",
                   subjects=[n for n, _, _ in unneeded[:16]],
                   evidence={"settings": {n: v for n, v, _ in unneeded}, "devices": efa[:8]})


@check("NET022", "slingshot-libfabric-settings", family="network", needs=("env", "pci"), reads=("network",))
def slingshot_libfabric_settings(snap):
    """On HPE Slingshot (CXI NICs) in a job across hosts, a libfabric or NCCL setting HPE's note calls mandatory is
    not set as it says.

    What it checks
        With CXI NICs here (/sys/class/cxi_user; when that was not recorded, Slingshot's hsn<N> host
        interfaces, the names the note gives NCCL_SOCKET_IFNAME) and a job across hosts: each variable of HPE's
        application note for NCCL over Slingshot (ddpdoctor/data/cxi_settings.json) against its
        recommended value. FI_MR_CACHE_MONITOR (userfaultfd or kdreg2) and
        FI_CXI_DISABLE_HOST_REGISTER=1: a warning, the note names deadlocks and stale registrations;
        the rest (FI_CXI_DEFAULT_CQ_SIZE, FI_CXI_RDZV_PROTO, FI_CXI_RX_MATCH_MODE,
        FI_CXI_RDZV_EAGER_SIZE, FI_CXI_DEFAULT_TX_SIZE, NCCL_NET_GDR_LEVEL, NCCL_NET): one note.

    Why it matters
        NCCL reaches Slingshot through aws-ofi-nccl and libfabric's cxi provider, which registers
        memory itself and relies on a cache monitor to drop stale registrations; NCCL's many small
        messages exercise it as MPI codes do not. HPE calls these settings mandatory: the host-register
        allocations the provider makes otherwise "may cause deadlocks", the monitor detects changes
        between virtual and physical pages, the queue sizes matter for large jobs, and without
        NCCL_NET="AWS Libfabric" a plugin that fails to load falls back to sockets silently.

    Example
        torchrun across 4 nodes of a Slingshot cluster with only LD_LIBRARY_PATH set for the plugin.

    Fix
        export FI_MR_CACHE_MONITOR=userfaultfd FI_CXI_DISABLE_HOST_REGISTER=1 FI_CXI_DEFAULT_CQ_SIZE=131072 ...
    """
    from ddpdoctor.facts.net import cxi_settings_off, multi_node, slingshot_nics  # noqa: PLC0415

    pci = snap.get("pci") or {}
    # the Slingshot host interfaces the note names (NCCL_SOCKET_IFNAME=hsn0,hsn1,hsn2,hsn3) stand in when the cxi
    # driver's class was not recorded (a snapshot from before it was gathered)
    cxi = slingshot_nics(snap)
    spread = multi_node(snap) if cxi else None
    if pci.get("unavailable") or not cxi or not spread:
        return
    off = cxi_settings_off(env_of(snap))
    note = "HPE Slingshot application note for NCCL (ryanhankins/shs-ccl-docs nccl/nccl_tuning_guide.md)"

    def shown(row, value):
        want = f">= {row['at_least']}" if "at_least" in row else " or ".join(row["want"])
        return f"{row['name']}={value if value is not None else '(unset)'} (wants {want})"

    def export(row):
        return f"{row['name']}={row['at_least'] if 'at_least' in row else row['want'][0]}".replace("AWS Libfabric",
                                                                                                 "'AWS Libfabric'")

    hard = [(r, v) for r, v in off if r["severity"] == "warning"]
    soft = [(r, v) for r, v in off if r["severity"] != "warning"]
    if hard:
        yield warning(f"{', '.join(shown(r, v) for r, v in hard)} on a Slingshot host ({', '.join(cxi[:4])}) of a job "
                      f"across hosts ({spread}): HPE calls these libfabric settings mandatory for NCCL",
                      detail=" ".join(f"{r['name']}: \"{r['says']}\"" for r, _ in hard) + f" ({note}.)",
                      fix="export " + " ".join(export(r) for r, _ in hard),
                      subjects=[r["name"] for r, _ in hard] + [f"cxi:{d}" for d in cxi[:4]],
                      evidence={"settings": {r["name"]: v for r, v in hard}, "devices": cxi[:8], "why_multi_node": spread})
    if soft:
        yield info(f"{len(soft)} more setting(s) HPE's Slingshot note recommends for NCCL are not as it says: "
                   + ", ".join(r["name"] for r, _ in soft[:8]),
                   detail=" ".join(f"{shown(r, v)}: \"{r['says']}\"" for r, v in soft) + f" ({note}.)",
                   fix="export " + " ".join(export(r) for r, _ in soft),
                   subjects=[r["name"] for r, _ in soft],
                   evidence={"settings": {r["name"]: v for r, v in soft}, "devices": cxi[:8]})
