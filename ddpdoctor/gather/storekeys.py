"""Reading keys of a c10d-style key-value store without polling (the rules of docs/scale.md).

Not a gatherer (it registers no section): the one helper that every "each rank writes a key, one
reader collects them" step shares (preflight's cross-rank facts, DoctorCallback's step records,
the in-process stall localizer, `ddpdoctor run`'s job-wide verdict across nodes, the comm
coordination). `store` is any object with `wait(keys, timedelta)`, `check`, `get` and
`multi_get` (a torch `TCPStore`, a `PrefixStore`, a `FileStore`...). No torch import here.

A reader blocks in one `wait` on all the keys it expects, bounded by its deadline, then reads them
in one `multi_get`: two requests, whatever the number of keys, instead of a check per key every
few milliseconds. Only when the deadline passes does it ask each key once (`check`), so the
caller can name who is missing.
"""
from __future__ import annotations

import contextlib

from datetime import timedelta
from typing import Any, Dict, Generator, Iterator, List, Sequence, Tuple

# A step written as a generator of store requests: it yields ("method", *args) and is sent what
# store.method(*args) returns (the comm coordination writes every step this way, see comm/coord.py).
Request = Tuple[Any, ...]
Ops = Generator[Request, Any, Any]


def is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "timeout" in text or "timed out" in text


def run_ops(ops: Ops, store: Any) -> Any:
    """Run a step's requests one at a time on `store` (blocking) and return the step's result. A
    store exception is thrown into the step where its request was, as a direct call would raise."""
    try:
        req = next(ops)
        while True:
            try:
                answer = getattr(store, req[0])(*req[1:])
            except Exception as exc:  # noqa: BLE001 - the step decides, as around a direct call
                req = ops.throw(exc)
            else:
                req = ops.send(answer)
    except StopIteration as stop:
        return stop.value


def wait_keys_ops(keys: Sequence[str], seconds: float) -> Ops:
    """Block until every key exists (True) or `seconds` pass (False). Other store errors raise."""
    try:
        yield ("wait", list(keys), timedelta(seconds=max(0.01, seconds)))
        return True
    except Exception as exc:  # noqa: BLE001 - torch raises DistStoreError on timeout
        if is_timeout(exc):
            return False
        raise


def wait_keys(store: Any, keys: Sequence[str], seconds: float) -> bool:
    """Block until every key exists (True) or `seconds` pass (False). Other store errors raise."""
    return run_ops(wait_keys_ops(keys, seconds), store)


def read_keys(store: Any, keys: Sequence[str], seconds: float) -> Tuple[Dict[str, bytes], List[str]]:
    """({key: raw value} of the keys present, [keys missing]) after at most `seconds`.

    One `wait` on all the keys, one `multi_get`; on timeout (or a store error) one `check` per key,
    once, and one `multi_get` of those present. Never raises: a key it cannot read is missing."""
    keys = list(keys)
    if not keys:
        return {}, []
    try:
        complete = wait_keys(store, keys, seconds)
    except Exception:  # noqa: BLE001 - a broken connection: read what can be read, once
        complete = False
    got = _multi_get(store, keys) if complete else read_present(store, keys)
    return got, [k for k in keys if k not in got]


def read_present(store: Any, keys: Sequence[str]) -> Dict[str, bytes]:
    """{key: raw value} of those of `keys` that exist now: one `check` per key, once (no wait), and
    one `multi_get`. Never raises."""
    present = []
    for k in keys:
        try:
            if store.check([k]):
                present.append(k)
        except Exception:  # noqa: BLE001
            continue
    return _multi_get(store, present)


def _multi_get(store: Any, keys: List[str]) -> Dict[str, bytes]:
    if not keys:
        return {}
    try:
        return dict(zip(keys, store.multi_get(keys)))
    except Exception:  # noqa: BLE001 - a store without multi_get: one get per key
        out = {}
        for k in keys:
            try:
                out[k] = store.get(k)
            except Exception:  # noqa: BLE001
                continue
        return out


class _Borrowed:
    """A store client lent for one block: every call goes to the client until the block ends, then the
    reference is dropped, whoever still holds this object."""

    def __init__(self, client: Any):
        self._client = client

    def __getattr__(self, name: str) -> Any:
        client = self.__dict__.get("_client")
        if client is None:
            raise RuntimeError("this store client was closed at the end of its `with own_client(...)` block")
        return getattr(client, name)


@contextlib.contextmanager
def own_client(store: Any) -> Iterator[Any]:
    """A client of `store` of the calling thread's own (`clone()`), else `store` itself; the clone's
    connection is closed when the block ends.

    A TCPStore client serializes its requests: a thread blocked in `wait` on it would hold up every
    other thread's request on the same client (the job's own `init`, `new_group`...). A background
    thread that may block uses its own connection. torch has no close() for a client: its socket closes
    when the object is freed. So the clone is lent inside a wrapper that drops it when the block ends,
    instead of leaving one connection per stall gather open until the garbage collector runs."""
    try:
        lent = _Borrowed(store.clone())
    except Exception:  # noqa: BLE001 - HashStore, older torch: share the caller's client
        yield store
        return
    try:
        yield lent
    finally:
        lent.__dict__["_client"] = None  # the last reference: the C++ client closes its socket now
