"""A run folder named from the wall clock on every rank (round 19, wave 5: a class the held-out review found;
a preview rule)."""
from __future__ import annotations

import ast
import functools
import json
import os
from typing import Dict, Set, Tuple

from . import rule
from ..analysis import Call
from ..names import dotted
from ._every_rank import every_rank_calls, unproven
from .rank_writes import weights_every_caller

_SOURCE = ("Python documentation: datetime.datetime.now(), time.time(), time.strftime() read each process's own "
           "clock (docs.python.org/3/library/datetime.html, time.html); torch.distributed.broadcast_object_list "
           "sends rank src's picklable objects to every rank (pytorch/pytorch torch/distributed/"
           "distributed_c10d.py, v2.13.0 cf30153)")

# Calls whose value is the local wall clock (a name built from one differs between processes started apart).
_CLOCK = frozenset(("datetime.datetime.now", "datetime.datetime.today", "datetime.datetime.utcnow",
                    "datetime.date.today", "time.time", "time.time_ns", "time.strftime", "time.localtime",
                    "time.gmtime", "time.ctime", "time.asctime"))
# Calls that create or write into a folder or a file under it.
_WRITES = frozenset(("os.makedirs", "os.mkdir", "torch.save", "open", "builtins.open", "shutil.copy",
                     "shutil.copyfile", "shutil.copytree", "logging.FileHandler", "numpy.save", "numpy.savez",
                     "torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter",
                     "torch.utils.tensorboard.writer.SummaryWriter"))
_WRITE_NAMES = frozenset(("mkdir", "save_pretrained", "save_model", "save_state", "save_checkpoint",
                          "write_text", "write_bytes", "to_csv", "savefig"))
_SHARES = frozenset(("broadcast_object_list", "broadcast", "all_gather_object", "scatter_object_list"))


_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                     "lint_clock.json")


@functools.lru_cache(maxsize=1)
def _clock_facts() -> Tuple[frozenset, str, frozenset]:
    """(strftime directives that read the time of day, the flags that may precede them, calls whose value is a
    date only), from ddpdoctor/data/lint_clock.json."""
    with open(_DATA, encoding="utf-8") as fh:
        doc = json.load(fh)
    return frozenset(doc["time_of_day"]["directives"]), doc["time_of_day"]["flags"], frozenset(doc["date_only_calls"])


def _time_of_day(fmt: str) -> bool:
    """A strftime format reads the hour, minute or second (`%Y%m%d-%H%M%S`, `%T`, `%-H`); `%Y%m%d` does not."""
    directives, flags, _ = _clock_facts()
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            i += 1
            continue
        j = i + 1
        while j < len(fmt) and (fmt[j] in flags or fmt[j].isdigit()):
            j += 1
        if j < len(fmt) and fmt[j] in directives:
            return True
        i = j + 1
    return False


def _date_only(path_nodes: list, index, scope) -> Set[int]:
    """The clock calls of a path expression whose text is a date only (round 21, fr137: `strftime('%Y%m%d')`,
    `time.strftime('%m%d')`, `date.today()`, `datetime.now().date()`): processes started together name the same
    folder except across midnight. A format that is not a literal string is not judged (stays a clock read)."""
    _, _, dates = _clock_facts()
    out: Set[int] = set()
    for n in path_nodes:
        if isinstance(n, ast.FormattedValue) and isinstance(n.value, ast.Call) and \
                isinstance(n.format_spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in n.format_spec.values):
            if not _time_of_day("".join(str(v.value) for v in n.format_spec.values)):
                out.add(id(n.value))   # f"{datetime.now():%Y%m%d}"
        if not isinstance(n, ast.Call):
            continue
        qual = index.qual(n.func, scope)
        if qual in dates:
            out.add(id(n))
        fmt = None
        if qual == "time.strftime" and n.args:
            fmt = n.args[0]
            inner = n.args[1:]
        elif isinstance(n.func, ast.Attribute) and n.func.attr == "strftime" and n.args:
            fmt = n.args[0]
            inner = [n.func.value]
        elif isinstance(n.func, ast.Attribute) and n.func.attr == "date" and not n.args:
            out.update(id(c) for c in ast.walk(n.func.value) if isinstance(c, ast.Call))   # datetime.now().date()
            continue
        if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str) and not _time_of_day(fmt.value):
            out.add(id(n))
            out.update(id(c) for x in inner for c in ast.walk(x) if isinstance(c, ast.Call))
    return out


def _reads_clock(node: ast.AST, index, scope, helpers=frozenset()) -> bool:
    """The expression is a path or name built from a clock read (`"runs/" + time.strftime(...)`), or a call of a
    function of this file that returns one (`make_run_dir(root)`, round 20), not data that holds one
    (`{"time": time.time()}`, `Trainer(...)`), nor a date only (`strftime('%Y%m%d')`, round 21)."""
    nodes = list(_path_nodes(node))
    dates = _date_only(nodes, index, scope)
    return any(isinstance(n, ast.Call) and id(n) not in dates and (
        index.qual(n.func, scope) in _CLOCK or (helpers and id(index.function_of(n.func, scope)) in helpers))
        for n in nodes)


def _returns(scope) -> list:
    """The `return` values of a function's own body (not of functions nested in it)."""
    out, todo = [], list(getattr(scope.node, "body", ()) if isinstance(scope.node, (ast.FunctionDef,
                                                                                     ast.AsyncFunctionDef)) else ())
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return) and n.value is not None:
            out.append(n.value)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return out


def _names(node: ast.AST) -> Set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)):
            d = dotted(n)
            if d:
                out.add(d)
    return out


def _key(name: str, scope, index):
    """Where a name lives: an attribute (`args.out_dir`, `self.log_dir`) is one for the module; a plain name is
    local to its function."""
    return (None, name) if "." in name else (id(scope), name)


def _lookup(tainted, name: str, scope, index):
    """The taint of `name` as seen from `scope`: its own local, else a module-level name."""
    if "." in name:
        return tainted.get((None, name))
    return tainted.get((id(scope), name)) or tainted.get((id(index.module), name))


# Calls whose value is still the path built from their arguments (a call of anything else - a Trainer, a dict, a
# sum - is data that holds the clock, not a folder named from it).
_PATH_CALLS = frozenset(("join", "Path", "PurePath", "str", "format", "strftime", "expanduser", "abspath", "realpath",
                         "normpath", "joinpath", "fspath", "replace", "resolve", "isoformat", "ctime", "now", "today",
                         "time", "localtime", "gmtime", "asctime", "int", "round"))
# The path argument of each writer: (position, keyword); a method of a Path (`run_dir.mkdir()`) writes its receiver.
_PATH_ARG = {"torch.save": (1, "f"), "shutil.copy": (1, "dst"), "shutil.copyfile": (1, "dst"),
             "shutil.copytree": (1, "dst"), "numpy.save": (0, "file"), "numpy.savez": (0, "file"),
             "logging.FileHandler": (0, "filename"), "os.makedirs": (0, "name"), "os.mkdir": (0, "path"),
             "open": (0, "file"), "builtins.open": (0, "file"), "torch.utils.tensorboard.SummaryWriter": (0, "log_dir"),
             "torch.utils.tensorboard.writer.SummaryWriter": (0, "log_dir"), "tensorboardX.SummaryWriter": (0, "logdir")}
_METHOD_PATH_KW = ("save_directory", "output_dir", "path", "fname", "path_or_buf", "filepath", "filename")


def _path_nodes(node: ast.AST):
    """The nodes a path expression is built from: through f-strings, `+`, `/`, os.path.join, Path(), str(),
    .format(), .strftime(); not the arguments of other calls, nor the items of a dict or list (data)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, ast.Attribute):
            todo.append(n.value)
        elif isinstance(n, ast.Call):
            last = (dotted(n.func) or "").rsplit(".", 1)[-1] or getattr(n.func, "attr", "")
            if last in _PATH_CALLS:
                todo.extend([*n.args, *(k.value for k in n.keywords)])
                if isinstance(n.func, ast.Attribute):
                    todo.append(n.func.value)
        elif isinstance(n, (ast.BinOp, ast.JoinedStr, ast.FormattedValue, ast.IfExp, ast.Starred)):
            todo.extend(ast.iter_child_nodes(n))


def _item_name(node: ast.AST):
    """`config["train"]["save_path"]` -> 'config["train"]["save_path"]': an item of a dict named by constant string
    keys under a dotted name, kept as a name of its own (round 25, fr167 zly7/segment-anything-2: the run folder
    stored in the loaded config, `config["train"]["save_path"] = os.path.join(..., formatted_time)`); None otherwise."""
    keys = []
    while isinstance(node, ast.Subscript):
        if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            return None
        keys.append(node.slice.value)
        node = node.value
    base = dotted(node) if keys else None
    return base + "".join(f'["{k}"]' for k in reversed(keys)) if base else None


def _path_names(node: ast.AST) -> Set[str]:
    """The dotted names (and string-keyed items, `config["out"]`) a path expression is built from (see _path_nodes)."""
    out = set()
    for n in _path_nodes(node):
        d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else _item_name(n) if isinstance(n, ast.Subscript) \
            else None
        if d:
            out.add(d)
    return out


def _assign_targets(a) -> list:
    """The names an assignment binds, with string-keyed dict items (`config["train"]["save_path"] = ...`)."""
    out = [x for x in a.targets if x]
    if isinstance(a.node, ast.Assign):
        out += [n for n in (_item_name(x) for x in a.node.targets if isinstance(x, ast.Subscript)) if n]
    return out


def _stamped(index) -> Dict[tuple, ast.AST]:
    """Names (`stamp`, `args.output_dir`, `out_dir`) whose value is built from the wall clock, directly or through
    another such name (`out = os.path.join(args.out, stamp)`), on every rank: (scope, name) -> the assignment that
    reads the clock. A function of the file that returns such a path (`def make_run_dir(root): return
    os.path.join(root, datetime.now().strftime(...))`) makes its callers' names clock-built too (round 20: the
    run folder built in a helper and returned to every rank)."""
    tainted: Dict[tuple, ast.AST] = {}
    helpers: Dict[int, ast.AST] = {}
    functions = [s for s in index.scopes if s.kind == "function"]
    for _ in range(3):
        for a in index.assigns:
            if a.value is None or a.ctx.gated:
                continue   # computed on one rank only: the rule's quiet case (then shared or used there)
            via = [o for o in (_lookup(tainted, n, a.scope, index) for n in sorted(_path_names(a.value)))
                   if o is not None]
            if via or _reads_clock(a.value, index, a.scope, helpers):
                for target in _assign_targets(a):
                    tainted.setdefault(_key(target, a.scope, index), via[0] if via else a.node)
        for call in index.calls:
            # `save_checkpoint(model, self.ckpt_dir)`: a function of this file handed a clock-built name writes
            # through its parameter (round 20: the held-out set's folders written through the project's helpers)
            if call.ctx.gated or not call.node.args and not call.node.keywords:
                continue
            fn = index.function_of(call.node.func, call.scope)
            if fn is None or fn.kind != "function" or not fn.params:
                continue
            params = fn.params
            if params[0] in ("self", "cls") and isinstance(call.node.func, ast.Attribute):
                params = params[1:]
            named = [(params[i], a) for i, a in enumerate(call.node.args[:len(params)])
                     if not isinstance(a, ast.Starred)]
            named += [(k.arg, k.value) for k in call.node.keywords if k.arg in params]
            for param, arg in named:
                # only a name the run keeps (`self.out_dir`, `args.save_dir`): a local clock-named log file handed to
                # a logger helper is one rank's own file (fr132 max-wzm/doctr-plus get_logger, fr125 ArcFace Logger)
                via = [o for o in (_lookup(tainted, n, call.scope, index) for n in sorted(_path_names(arg))
                                   if "." in n) if o is not None]
                if via:
                    tainted.setdefault((id(fn), param), via[0])
        for fn in functions:
            if id(fn) in helpers:
                continue
            for value in _returns(fn):
                via = [o for o in (_lookup(tainted, n, fn, index) for n in sorted(_path_names(value))) if o is not None]
                if via or _reads_clock(value, index, fn, helpers):
                    helpers[id(fn)] = via[0] if via else value
                    break
    return tainted


def _shared(index, tainted) -> Set[tuple]:
    """Names of a function whose value is handed to a broadcast/gather there (`obj = [stamp];
    dist.broadcast_object_list(obj, src=0); stamp = obj[0]`): every rank then uses rank src's value, so the
    function's clock-built names (before and after it) are agreed on."""
    out: Set[tuple] = set()
    for call in index.calls:
        if call.name not in _SHARES:
            continue
        named = set().union(*(_names(x) for x in call.node.args), *(_names(k.value) for k in call.node.keywords))
        lists = {t for a in index.assigns if a.scope is call.scope and a.value is not None and
                 any(_lookup(tainted, n, a.scope, index) is not None for n in _names(a.value)) for t in a.targets}
        if any(_lookup(tainted, n, call.scope, index) is not None for n in named) or named & lists:
            out |= {k for k in tainted if k[0] in (id(call.scope), None)}
    return out


def _path_args(call: Call):
    """The expressions a writer call takes its path from."""
    if call.qual in _PATH_ARG or (call.text == "open" and call.qual is None):
        pos, kw = _PATH_ARG.get(call.qual or "open")
        arg = call.arg(pos, kw)
        return [arg] if arg is not None else []
    if call.name in ("mkdir", "write_text", "write_bytes") and isinstance(call.node.func, ast.Attribute):
        return [call.node.func.value]   # Path(run_dir).mkdir(): the receiver is the path
    arg = call.arg(0)
    return [a for a in [arg, *(call.kw(k) for k in _METHOD_PATH_KW)] if a is not None]


@rule("LINT038", "wallclock-dir-every-rank")
def wallclock_dir_every_rank(t):
    """A run folder named from the wall clock on every rank, then written to.

    What it checks
        In a distributed script (it joins a process group, spawns the ranks or is launched by torchrun): a name
        built from the clock (`datetime.now()`, `time.strftime()`, `time.time()`), directly or through another
        such name (`out = os.path.join(args.out, stamp)`), computed on every rank and then used to create or write
        a folder or file (`os.makedirs`, `open(..., "w")`, `torch.save`, `SummaryWriter`, `save_pretrained`,
        `Path.mkdir`) on every rank. Quiet when the name is computed or used under a rank-0 gate, when it is
        passed through `broadcast_object_list`/`all_gather_object`, and in a single-process script. Since round 20
        also a name a function of the file returns built from the clock (`run_dir = make_run_dir(root)`), and a
        kept name (`self.out_dir`, `args.save_dir`) handed to a function of the file that writes through its
        parameter (`save_checkpoint(model, self.out_dir)`). Since round 21 a date-only name (a literal strftime
        format with no hour, minute or second: `%Y%m%d`; `date.today()`) is not per rank: processes started
        together differ only across midnight (ddpdoctor/data/lint_clock.json). Since round 21 also a Lightning
        Trainer whose strategy re-runs the script per rank makes the script's own code every-rank. Since round 25
        a string-keyed item of a dict (`config["train"]["save_path"] = os.path.join(..., stamp)`) is followed like
        a name. A preview
        rule (round 19): a note by default, a warning with `--preview` when the write runs on every rank.
        Since round 22 a `save_pretrained(out, is_main_process=...)` there says that
        is_main_process gates only the config (the safetensors weights are written on every rank: transformers
        modeling_utils, data/lint_writers.json), and is a note when safe_serialization=False with
        save_function=accelerator.save leaves the other ranks only an empty folder.

    Why it matters
        The ranks start a few hundred milliseconds apart (more across nodes), so each reads a different second
        and names its own folder: rank 0's checkpoints land in one, the other ranks' logs and files in others,
        and a resume or an evaluation that reads "the run folder" finds only part of it.

    Example
        dist.init_process_group("nccl")
        out_dir = os.path.join("runs", datetime.now().strftime("%Y%m%d-%H%M%S"))
        os.makedirs(out_dir, exist_ok=True)

    Fix
        Compute the name on rank 0 and share it:
        `obj = [stamp if dist.get_rank() == 0 else None]; dist.broadcast_object_list(obj, src=0); stamp = obj[0]`,
        or take a run id the launcher gives every rank (torchrun's `TORCHELASTIC_RUN_ID`, SLURM_JOB_ID).
    """
    index = t.index
    if not any(q in index.by_qual for q in _CLOCK):
        return   # the file reads no clock: nothing to follow
    tainted = _stamped(index)
    if not tainted:
        return
    shared = _shared(index, tainted)
    tainted = {k: v for k, v in tainted.items() if k not in shared}
    if not tainted:
        return

    def writes(call: Call) -> bool:
        is_open = call.qual in ("open", "builtins.open") or (call.text == "open" and call.qual is None)
        if not (is_open or call.qual in _WRITES or call.name in _WRITE_NAMES):
            return False
        if is_open:
            mode = call.arg(1, "mode")
            if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax")):
                return False
        used = set()
        for expr in _path_args(call):
            used |= _path_names(expr)
        return any(_lookup(tainted, n, call.scope, index) is not None for n in used)

    for call, proof in every_rank_calls(t, writes, 10**6):
        name = min((n for e in _path_args(call) for n in _path_names(e)
                    if _lookup(tainted, n, call.scope, index) is not None),
                   key=lambda n: (len(n), n))
        origin = _lookup(tainted, name, call.scope, index)
        # save_pretrained(is_main_process=..., safe_serialization=False, save_function=accelerator.save): the other
        # ranks only create their (empty) folder; nothing of the run lands there (data/lint_writers.json)
        empty = call.name == "save_pretrained" and call.kw("is_main_process") is not None and \
            not weights_every_caller(call)
        yield t.finding(
            "warning" if proof is not None and not empty else "info", call.node,
            f"`{name}` is named from the wall clock (line {origin.lineno}) on every rank and written to here: "
            "each rank can get its own folder" + unproven(t, call, proof)
            + (" (only empty folders on the other ranks: is_main_process= with safe_serialization=False and "
               "save_function=accelerator.save writes everything on the main process)" if empty else "")
            + (" (is_main_process= gates only the config files: the safetensors weights are written by every rank, "
               "into the folder it named)" if weights_every_caller(call) else ""),
            detail=("Every rank reads its own clock when it builds the name; ranks that start in different seconds "
                    "create different folders, so the run's checkpoints and logs scatter."),
            fix=("obj = [stamp if dist.get_rank() == 0 else None]; dist.broadcast_object_list(obj, src=0); "
                 "stamp = obj[0]   # or use os.environ['TORCHELASTIC_RUN_ID']"),
            evidence={"name": name, "clock_line": origin.lineno, "call": call.qual or call.text,
                      "every_rank": proof.as_dict() if proof is not None else None, "source": _SOURCE,
                      **({"weights_every_rank": True} if weights_every_caller(call) else {})})
