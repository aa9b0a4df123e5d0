"""F12: checkpoints and logs written by every rank of a hand-written training loop."""
from __future__ import annotations

import ast
import functools
import json
import os
from typing import Dict, Optional, Set, Tuple

from ..analysis import Call, ModuleIndex, exclusive, gated_scopes, module_fact
from .. import conditions as cond
from ..conditions import is_rankish
from ..names import dotted, last_name
from . import rule
from ._common import (INIT_PG, SPAWN, is_distributed, is_trainer_script, launched_distributed, lightning_relaunch, names_the_rank,
                      sharded)
from ._reach import Reach, step_methods, last_gasp, reach

# save_pretrained of these writes a few small JSON files; the model's weights are what matters.
_SMALL_SAVES = ("tokenizer", "processor", "config", "feature_extractor", "image_processor", "tok")


_WRITERS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data",
                             "lint_writers.json")


@functools.lru_cache(maxsize=1)
def _catalogue() -> Tuple[Dict[str, dict], Dict[str, dict], frozenset]:
    """The file writers of ddpdoctor/data/lint_writers.json (np.save, DataFrame.to_csv, json.dump,
    logging.FileHandler...), by qualified name and by method name, each with where its write was read; and the
    last names they end in (a cheap first test: most calls of a script are none of them)."""
    with open(_WRITERS_FILE, encoding="utf-8") as fh:
        writers = json.load(fh)["writers"]
    by_qual = {w["qual"]: w for w in writers if "qual" in w}
    by_method = {w["method"]: w for w in writers if "method" in w}
    return by_qual, by_method, frozenset([q.rsplit(".", 1)[-1] for q in by_qual] + list(by_method))


def catalogued(call: Call) -> Optional[dict]:
    """The catalogue's entry for a call that writes a file (`np.save(path, a)`, `df.to_csv(path)`), or None."""
    by_qual, by_method, names = _catalogue()
    if call.name not in names:
        return None
    if call.name == "open":
        return _open_for_writing(call, by_qual.get("open"))
    hit = by_qual.get(call.qual or "")
    if hit is None and not call.qual and call.text == call.name:
        # `from timm.utils import *` then a bare `update_summary(...)` (fr100 SudongCAI/IIEU): the catalogued name
        # from a module the file star-imports
        hit = next((by_qual[f"{m}.{call.name}"] for m in _star_modules(call) if f"{m}.{call.name}" in by_qual), None)
    if hit is None and call.name in by_method and isinstance(call.node.func, ast.Attribute) and \
            not (call.qual or "").startswith(("torch.", "os.", "sys.")):
        hit = by_method[call.name]
    if hit is None or (hit.get("receiver") and not _made_by(call, hit["receiver"])):
        return None
    if hit["what"] == "DataFrame.to_csv" and not (call.node.args or call.kw("path_or_buf") is not None):
        return None  # `df.to_csv()` returns the text: nothing is written
    return hit


def _star_modules(call: Call) -> list:
    """The modules the file of `call` star-imports at its top level (`from timm.utils import *`)."""
    scope = call.scope
    while scope.parent is not None:
        scope = scope.parent
    tree = scope.node
    cache = _STAR_CACHE.get(id(tree))
    if cache is None or cache[0] is not tree:
        mods = [stmt.module for stmt in getattr(tree, "body", []) if isinstance(stmt, ast.ImportFrom) and stmt.module
                and not stmt.level and any(a.name == "*" for a in stmt.names)]
        cache = _STAR_CACHE[id(tree)] = (tree, mods)
    return cache[1]


_STAR_CACHE: Dict[int, tuple] = {}


def _import_qual(expr: ast.AST, scope) -> Optional[str]:
    """`Image.fromarray` -> "PIL.Image.fromarray" through the imports of the enclosing scopes (`from PIL import
    Image`, `import PIL.Image as Image`), or None."""
    text = dotted(expr)
    if not text:
        return None
    root, _, rest = text.partition(".")
    s = scope
    while s is not None:
        if root in s.imports:
            return s.imports[root] + ("." + rest if rest else "")
        s = s.parent
    return None


def _made_by(call: Call, makers) -> bool:
    """The receiver of `x.save(...)` is the result of one of `makers` (library calls that return the object the
    catalogue means, a PIL image): `Image.fromarray(a).save(p)`, or `im = Image.open(p); ...; im.save(q)` with
    `im`'s last plain assignment in the same function."""
    recv = call.node.func.value if isinstance(call.node.func, ast.Attribute) else None
    if isinstance(recv, ast.Name):
        recv = call.scope.values.get(recv.id)
    return isinstance(recv, ast.Call) and _import_qual(recv.func, call.scope) in makers


def _open_for_writing(call: Call, entry: Optional[dict]) -> Optional[dict]:
    """The builtin `open(path, "w")` (also "wb", "w+", "x"): it truncates or creates the file, so N ranks opening
    one path clobber each other (CPython Lib/_pyio.py: mode 'w' opens O_CREAT|O_TRUNC). Append mode, reads and a
    method `x.open(...)` are not; nor is a file object handed to json.dump (reported as the json.dump)."""
    func = call.node.func
    if entry is not None and _pathlib_open(call):
        # `(out_dir / "train.log").open("w")` (fr103 NasrinKalanat): pathlib's Path.open(mode) is io.open(self, mode)
        mode = call.arg(0, "mode")
        return entry if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
            any(m in mode.value for m in "wx") else None
    if entry is None or not isinstance(func, ast.Name) or func.id != "open" or call.qual not in (None, "open",
                                                                                                "builtins.open"):
        return None
    mode = call.arg(entry.get("mode_arg", 1), "mode")
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(m in mode.value for m in "wx")):
        return None
    if _feeds_json_dump(call):
        return None
    if _touch_only(call):
        return None
    return entry


def _touch_only(call: Call) -> bool:
    """`with open(done_marker, "w"): pass`: the file is created (or truncated) empty and nothing is written to it, a
    marker such as '.train.done' (fr112 kackav/dialogue_state_tracking). Every rank creating the same empty file loses
    nothing: no content to interleave or clobber."""
    for node in ast.walk(call.scope.node):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.context_expr is call.node:
                    return all(isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))
                               for st in node.body)
    return False


def _pathlib_open(call: Call) -> bool:
    """`(folder / "name").open(...)` or `Path(...).open(...)`: a method open whose receiver is plainly a pathlib path
    (python/cpython Lib/pathlib/_local.py: Path.open(mode) returns io.open(self, mode, ...))."""
    func = call.node.func
    if not isinstance(func, ast.Attribute) or func.attr != "open":
        return False
    recv = func.value
    if isinstance(recv, ast.BinOp) and isinstance(recv.op, ast.Div):
        return True
    return isinstance(recv, ast.Call) and (dotted(recv.func) or "").rsplit(".", 1)[-1] in ("Path", "PosixPath")


def _feeds_json_dump(call: Call) -> bool:
    """`with open(p, "w") as f: json.dump(d, f)` or `json.dump(d, open(p, "w"))`: the json.dump is the write."""
    dumps = [c for c in call.scope.calls if c.qual == "json.dump"]
    if not dumps:
        return False
    for other in dumps:
        fp = other.node.args[1] if len(other.node.args) > 1 else other.kw("fp")
        if fp is call.node:
            return True
    for node in ast.walk(call.scope.node):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.context_expr is call.node and isinstance(item.optional_vars, ast.Name):
                    inside = {id(n) for st in node.body for n in ast.walk(st)}
                    for other in dumps:
                        fp = other.node.args[1] if len(other.node.args) > 1 else other.kw("fp")
                        if id(other.node) in inside and isinstance(fp, ast.Name) and \
                                fp.id == item.optional_vars.id:
                            return True
    return False


def _opened(call: Call, expr: Optional[ast.AST]) -> Optional[ast.Call]:
    """The `open(...)` call a file object comes from: inline (`json.dump(d, open(p, "w"))`), a `with open(p, "w")
    as f:` around the call, or `f = open(p, "w")` in the same function."""
    if isinstance(expr, ast.Call) and last_name(expr.func) == "open":
        return expr
    if not isinstance(expr, ast.Name):
        return None
    for node in ast.walk(call.scope.node):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == expr.id and \
                        isinstance(item.context_expr, ast.Call) and last_name(item.context_expr.func) == "open":
                    return item.context_expr
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets) \
                and isinstance(node.value, ast.Call) and last_name(node.value.func) == "open":
            return node.value
    return None


def _writes_mode(opened: ast.Call) -> bool:
    mode = opened.args[1] if len(opened.args) > 1 else next((k.value for k in opened.keywords if k.arg == "mode"),
                                                            None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(m in mode.value for m in "wax")


def _catalogue_target(call: Call, entry: dict) -> Optional[list]:
    """The expressions that name the file a catalogued writer writes (for the per-rank and scratch tests), or
    None when it does not write a file this can see: json.dump to a file object that no `open(..., "w")` made
    (sys.stdout, a StringIO) is not reported."""
    pos = entry.get("file_arg", 0)
    if pos == "receiver":  # `path.write_text(text)`: the file is the object the method is called on
        func = call.node.func
        return [func.value] if isinstance(func, ast.Attribute) else None
    arg = call.node.args[pos] if 0 <= pos < len(call.node.args) else None
    if entry.get("file_keyword"):  # `logging.basicConfig(filename=...)`: a file only when that keyword is given
        return next(([k.value] for k in call.node.keywords if k.arg == entry["file_keyword"]), None)
    if arg is None:
        arg = next((k.value for k in call.node.keywords if k.arg in ("file", "fp", "fname", "filename",
                                                                      "path_or_buf")), None)
    if entry.get("qual") == "open":
        if _pathlib_open(call):
            return [call.node.func.value]  # the path is the receiver; the first argument is the mode
        return [arg] if arg is not None else []
    if entry["what"] == "json.dump":
        opened = _opened(call, arg)
        if opened is None or not _writes_mode(opened):
            return None
        return list(opened.args[:1]) + [k.value for k in opened.keywords if k.arg == "file"]
    return [arg] if arg is not None else []


def _module_attr(call: Call) -> Optional[str]:
    """`self.wandb.log(...)` where a method of the class did `import wandb; self.wandb = wandb`: the module the
    attribute holds ("wandb"), else None (fr85 Sharath-girish/LilNetX, both readers)."""
    recv = call.recv or ""
    klass = call.scope.cls
    if klass is None or not recv.startswith("self.") or recv.count(".") != 1:
        return None
    for method in klass.functions.values():
        for a in method.assigns:
            if a.targets == [recv] and isinstance(a.value, ast.Name):
                return _import_qual(a.value, a.scope)
    return None


def _write_kind(call: Call) -> Optional[str]:
    q = call.qual or ""
    if not q and call.name in ("init", "log") and (call.recv or "").startswith("self."):
        q = f"{_module_attr(call) or ''}.{call.name}"
    if q == "torch.save":
        return "torch.save"
    if call.name == "save_pretrained" and call.kw("is_main_process") is None:
        recv = (call.recv or "").rsplit(".", 1)[-1].lower()
        if any(recv.endswith(w) or recv.startswith(w) for w in _SMALL_SAVES):
            # a tokenizer/processor/config save: a few small files every rank rewrites at once, a note (_metadata);
            # both readers register it (fr71 ServiceNow, fr75 amew0/train x3)
            return f"{call.text or 'save_pretrained'}()"
        return f"{call.text or 'save_pretrained'}()"
    if q.startswith("wandb.") and call.name in ("init", "log"):
        return f"wandb.{call.name}"
    if q.endswith(".SummaryWriter"):
        return "SummaryWriter"
    if q.startswith("mlflow.") and (call.name or "").startswith(("log_", "start_run")):
        return f"mlflow.{call.name}"
    entry = catalogued(call)
    if entry is not None and _catalogue_target(call, entry) is not None:
        return entry["what"]
    return None


def _helper_write_kind(t, index: ModuleIndex, call: Call) -> Optional[Tuple[str, bool]]:
    """A call of a function of an imported, unlinted project module that writes with no rank test of its own
    (`create_experiment_dir(...)`, `make_writer(path)`): (what, small). Only a name this file imports from a project
    module (`from exp_utils import make_writer`, `import exp_utils as eu; eu.make_writer(...)`) counts, so a method of
    some object that shares the helper's name does not. The fact about the helper is computed once per run."""
    if not t.facts.imported or not call.name:
        return None
    text = dotted(call.node.func) or ""
    root = text.split(".", 1)[0]
    target = index.module.imports.get(root)
    if not target or target.lstrip(".").split(".")[0] in _LIBRARIES:
        return None
    fact = t.facts.helper_write(call.name)
    if fact is None:
        return None
    what, line, where, small = fact
    return f"{text}() (it runs {what} in {where}:{line})", small


@functools.lru_cache(maxsize=1)
def _unread_facts() -> dict:
    with open(_WRITERS_FILE, encoding="utf-8") as fh:
        return json.load(fh)["unread_save_helpers"]


def _unread_save_helper(t, index: ModuleIndex, call: Call) -> Optional[str]:
    """`save_checkpoint({'epoch': e, 'state_dict': model.module.state_dict()}, is_best)` where save_checkpoint is
    imported from a project module that is neither linted nor found (`from utils.checkpoint import save_checkpoint`,
    fr160 DZ1245/rDL-SIM-pytorch): by its name and the state_dict it is handed, a checkpoint write whose body the
    linter cannot read (data/lint_writers.json unread_save_helpers). Returns its text, or None. Always a note."""
    facts = _unread_facts()
    name = (call.name or "").lower()
    if not name or not any(w in name for w in facts["name_words"]) or any(w in name for w in facts["gated_name_words"]):
        return None  # (`save_on_master(...)`: DETR's helper, named for the process that writes, gates itself)
    if call.recv and call.recv not in index.module.imports:
        # `model.save(current_step)` on the object whose `model.optimize_parameters(step)` trains (mmsr, CycleGAN's
        # save_networks): the model class of a project module saves its networks (data/lint_train_steps.json)
        if any(c.recv == call.recv and c.name in step_methods() for c in index.calls) and \
                not any(call.name in k.functions for ix in t.facts.indexes.values()
                        for k in ix.module.classes.values()):  # a linted class's save: judged in its body
            return f"{call.text}() (the model object that trains, its class not linted)"
        return None
    text = dotted(call.node.func) or ""
    target = index.module.imports.get(text.split(".", 1)[0])
    if not target or target.lstrip(".").split(".")[0] in _LIBRARIES or t.facts.imported_function(call.name):
        return None
    if any(call.name in ix.module.functions for ix in t.facts.indexes.values()):
        return None  # the project's own helper, linted in this run: its writes are judged where they are
    state = facts["state_call"]
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == state
               for a in list(call.node.args) + [k.value for k in call.node.keywords] for n in ast.walk(a)):
        return None
    module = target[:-len(call.name) - 1] if target.endswith("." + call.name) else target
    return f"{text}() (a helper of {module}, not linted: it is handed a state_dict())"


_LIBRARIES = frozenset({"torch", "transformers", "accelerate", "datasets", "numpy", "os", "sys", "json", "wandb",
                        "deepspeed", "lightning", "pytorch_lightning", "tensorboardX", "mlflow", "pandas", "shutil",
                        "logging", "pathlib", "pickle", "yaml", "omegaconf", "hydra", "tqdm", "torchvision", "timm"})


def _wandb_grouped(t) -> bool:
    """Every wandb.init of the run passes `group=`: one wandb run per process, grouped in the UI, which is what
    W&B documents for multi-process training ("Call wandb.init in all processes and use the group keyword
    argument to create a shared group. Each process will have its own wandb run",
    docs.wandb.ai/support/multiprocessing_eg_distributed_training; guides/track/log/distributed-training). Its
    wandb.init and wandb.log on every rank are that design, not duplicate writes (AllenInstitute/distributed-vae)."""
    got = t.facts.cache.get("rank_writes.wandb_grouped")
    if got is None:
        inits = [c for ix in t.facts.indexes.values() for c in ix.calls
                 if (c.qual or "").startswith("wandb.") and c.name == "init"]
        got = bool(inits) and all(c.kw("group") is not None for c in inits)
        t.facts.cache["rank_writes.wandb_grouped"] = got
    return got


_SCRATCH_WORDS = ("tmp", "temp", "buf", "bytesio", "stream")


@module_fact
def scratch_names(index: ModuleIndex) -> Set[str]:
    """Names bound to in-memory buffers or temporary files: writing those on every rank is harmless."""
    out: Set[str] = set()
    for a in index.assigns:
        c = a.call
        if c is not None and any(w in (c.qual or c.text or "").lower() for w in ("tempfile", "bytesio", "temporary",
                                                                               "mkstemp", "mkdtemp")):
            out.update(n for n in a.targets if n)
    return out


def _scratch_target(call: Call, scratch: Set[str]) -> bool:
    return _scratch_expr(call.arg(1, "f"), scratch)


def _scratch_expr(target: Optional[ast.AST], scratch: Set[str]) -> bool:
    """The file written is an in-memory buffer or a temporary file (`io.BytesIO()`, `tmp_path`)."""
    if target is None:
        return False
    for n in ast.walk(target):
        if isinstance(n, (ast.Name, ast.Attribute)):
            text = (dotted(n) or "").lower()
            if dotted(n) in scratch or any(w in text for w in _SCRATCH_WORDS):
                return True
            if dotted(n) and dotted(n).split(".")[0] in scratch:
                return True
        if isinstance(n, ast.Call) and any(w in (dotted(n.func) or "").lower() for w in ("bytesio", "tempfile")):
            return True
    return False


def _handler_quieted_off_rank0(call: Call, flags) -> Optional[str]:
    """A `logging.FileHandler` whose records the other ranks do not write, by a test of the rank the linter can read:
    the handler's (or its logger's) level is set by the rank (`fh.setLevel(log_level if rank == 0 else 'ERROR')`, the
    OpenPCDet create_logger of fr88 wyddmw, fr90 hongfz16/DS-Net, fr91 shanjiayao/PTT), or the logger it is added to
    is handed, with a rank test, to a helper that silences it (`setup_for_distributed_logger(logger,
    is_master=is_main_process())`, fr92 yyxx1997/CLIP). Every rank still opens the file (mode 'a'), but only rank 0
    writes its records, the others at most their errors: round 14's debatable convention, 4 debatable first-read
    findings fr84-fr92; a note now, naming the test. Returns the evidence, or None."""
    if call.name != "FileHandler" or call.scope.node is None:
        return None
    handler = None
    for node in ast.walk(call.scope.node):
        if isinstance(node, ast.Assign) and node.value is call.node and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            handler = node.targets[0].id
    if handler is None:
        return None
    names = {handler}
    for node in ast.walk(call.scope.node):  # `logger.addHandler(fh)`: the logger the handler serves
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "addHandler" and \
                node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == handler and \
                isinstance(node.func.value, ast.Name):
            names.add(node.func.value.id)
    for node in ast.walk(call.scope.node):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr == "setLevel" and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in names and node.args and \
                cond.mentions_rank(node.args[0], flags):
            return f"`{node.func.value.id}.setLevel(...)` on line {node.lineno} depends on the rank"
        args = list(node.args) + [k.value for k in node.keywords]
        if any(isinstance(a, ast.Name) and a.id in names for a in args) and \
                any(not (isinstance(a, ast.Name) and a.id in names) and cond.mentions_rank(a, flags) for a in args):
            return f"`{dotted(node.func) or 'a helper'}(...)` on line {node.lineno} gets the logger with a test of the rank"
    return None


@functools.lru_cache(maxsize=1)
def _record_methods() -> frozenset:
    """The logging.Logger methods that emit a record (ddpdoctor/data/lint_writers.json logger_records)."""
    with open(_WRITERS_FILE, encoding="utf-8") as fh:
        return frozenset(json.load(fh)["logger_records"]["methods"])


def _handler_records_gated(t, index: ModuleIndex, call: Call) -> Optional[str]:
    """A `logging.FileHandler` built and added on every rank whose logger is only ever written under a rank test:
    `logging.getLogger().addHandler(fh)` then `if local_rank == 0: logging.info(...)` at every record (fr160
    DZ1245/rDL-SIM-pytorch, judged wrong as a warning). Every rank opens the file (FileHandler opens it for append in
    its constructor unless delay=True, CPython Lib/logging/__init__.py FileHandler.__init__) but the other ranks emit
    no record of the script's own into it: what is left is library records that reach the same logger, so a note, not
    a race of the script's writes. The records counted are the logger methods (Logger.debug/info/warning/error/
    exception/critical/log) on the logger the handler is added to, and for the root logger also `logging.info(...)`
    and the module's other loggers (they propagate to the root's handlers). Returns the evidence, or None."""
    if call.name not in ("FileHandler", "basicConfig") or call.scope.node is None:
        return None
    methods = _record_methods()
    handler = None if call.name == "FileHandler" else "<root>"
    for a in index.assigns:
        if a.call is call and len(a.targets) == 1 and a.targets[0]:
            handler = a.targets[0]
    if handler is None:
        return None
    loggers: Set[str] = set()
    root = handler == "<root>"  # logging.basicConfig(filename=...) adds its FileHandler to the root logger
    for c in index.calls:
        if c.name == "addHandler" and c.node.args and dotted(c.node.args[0]) == handler:
            v = c.node.func.value if isinstance(c.node.func, ast.Attribute) else None
            if isinstance(v, ast.Call) and dotted(v.func) in ("logging.getLogger", "getLogger") and (
                    not v.args or (isinstance(v.args[0], ast.Constant) and v.args[0].value in (None, "", "root"))):
                root = True
            elif c.recv:
                loggers.add(c.recv)
            else:
                return None
    if not loggers and not root:
        return None
    named = {n for a in index.assigns if a.call is not None and (a.call.qual or "").endswith("getLogger")
             for n in a.targets if n}
    records = [c for c in index.calls if c.name in methods and (
        c.recv in loggers or (root and ((c.qual or "") == f"logging.{c.name}" or c.recv in named)))]
    if not records:
        return None
    if root and any(c.name in methods and (c.qual or "") == f"logging.{c.name}"
                    for ix in t.facts.indexes.values() if ix is not index for c in ix.calls):
        return None  # another linted module logs to the root logger too: not read here
    gated = gated_functions(index, t)
    if all(t.facts.gated(index, c) or id(c.scope) in gated for c in records):
        return (f"every record of its logger ({len(records)}, lines {', '.join(str(c.line) for c in records[:4])}"
                f"{', ...' if len(records) > 4 else ''}) is written under a test of the rank")
    return None


def _call_sites(t, index: ModuleIndex, call: Call) -> list:
    """The lines of this file that call the function holding the write, outside any rank test (`save_checkpoint(args,
    'last', model, ...)` after the epoch loop, fr160 Zsongyuan/RejectionGrounding): where the write is reached on every
    rank, which is where a reader of the script sees the fault. At most five, in order."""
    if call.scope.kind != "function":
        return []
    from ._reach import callers_of  # noqa: PLC0415 (the module imports rank_writes' neighbours)
    return sorted({site.line for cix, site in callers_of(reach(t), call.scope)
                   if cix is index and not t.facts.gated(cix, site)})[:5]


def _per_rank_path(call: Call, index: Optional[ModuleIndex] = None) -> bool:
    """`torch.save(state, f"ckpt_rank{rank}.pt")`: each rank writes its own file on purpose. A path
    built on earlier lines (`shard = f"optim_{rank}.pt"; path = os.path.join(d, shard)`) counts too:
    names are followed back through their assignments."""
    entry = catalogued(call)
    if call.qual == "torch.save":
        args = list(call.node.args[1:2]) + [k.value for k in call.node.keywords if k.arg == "f"]
    elif entry is not None:  # `np.save(f"feat_{rank}.npy", x)`; `with open(f"res_{rank}.json", "w") as f: json.dump`
        args = _catalogue_target(call, entry) or []
    else:  # `SummaryWriter(log_dir=f"{d}/rank{rank}")`, `save_pretrained(f"out_{rank}")`: where it writes
        args = list(call.node.args) + [k.value for k in call.node.keywords if k.arg]
        if call.name == "log":
            # `wandb.log({"loss": loss})` logs metrics, not to a path: a value computed on the rank's GPU
            # (`loss = model(x.to(rank))`) makes no per-rank run; only the literal arguments are read (lint14b)
            return names_the_rank(args, call, index, limit=len(args))
    return names_the_rank(args, call, index)


def _per_rank_parameter(t, call: Call) -> bool:
    """The path is a parameter of the writing function and every caller found hands it a per-rank path
    (`trainer.train(loader, save_path)` with `save_path = os.path.join(d, f"model_rank{rank}.pth")` in the
    caller, another module: fr67 enicole0164/ee488_DCASE2020-Task2)."""
    from ._reach import callers_of  # noqa: PLC0415 (the module imports rank_writes' neighbours)
    from .init_rank import _bound_arg  # noqa: PLC0415
    entry = catalogued(call)
    if call.qual == "torch.save":
        args = list(call.node.args[1:2]) + [k.value for k in call.node.keywords if k.arg == "f"]
    elif entry is not None:
        args = _catalogue_target(call, entry) or []
    else:
        return False
    if len(args) != 1 or not isinstance(args[0], ast.Name):
        return False
    scope, name = call.scope, args[0].id
    if scope.kind != "function" or name not in scope.params or name in scope.values:
        return False
    sites = callers_of(reach(t), scope)
    return bool(sites) and all(names_the_rank([_bound_arg(site, scope, name)], site, cix)
                               for cix, site in sites if _bound_arg(site, scope, name) is not None) and \
        any(_bound_arg(site, scope, name) is not None for _cix, site in sites)


def _library_method(t, index: ModuleIndex, call: Call) -> str:
    """The write is in a method of a class in an imported module (no `__main__` guard) that no file of the
    run calls, or in a module-level function of such a module that no file of the run names: a library
    API whose caller decides which ranks run it. Returns its name, or ""."""
    s = call.scope
    if s.kind != "function" or any(c.ctx.guarded for c in index.calls):
        return ""
    if s.cls is None:  # a module-level helper nothing in the run names (BiRefNet's utils.save_checkpoint)
        if s.parent is not None and s.parent.kind == "module" and len(t.facts.indexes) > 1 and \
                t.facts.references(s.name) <= 1:
            return f"{s.name}()"
        return ""
    if t.facts.method_called(s.name):
        return ""
    if s.name == "__init__" and t.facts.constructed(s.cls.name):
        return ""  # `Runner(cfg, ...)` in train.py runs Runner.__init__ (fr79 nota-github/audiolm-trainer, both readers)
    return f"{s.cls.name}.{s.name}()"


def _in_dataset(index: ModuleIndex, call: Call) -> bool:
    """The write is in a method of a Dataset class (`torch.save(spec, spec_filename)` in `get_audio`)."""
    klass = call.scope.cls if call.scope.kind != "class" else call.scope
    if klass is None:
        return False
    bases = index.class_bases(klass)
    return any(b.startswith("torch.utils.data.") or b.lstrip("?").endswith(("Dataset", "IterableDataset"))
               for b in bases) or klass.name.endswith("Dataset")


def _imported_by_others(t, index: ModuleIndex) -> bool:
    """Another file of the run imports this module (`from model import save_model`)."""
    if len(t.facts.indexes) < 2 or any(c.ctx.guarded for c in index.calls):
        return False
    stem = os.path.splitext(os.path.basename(t.real_path))[0]
    for other in t.facts.indexes.values():
        if other is index:
            continue
        for target in other.module.imports.values():
            parts = target.lstrip(".").split(".")
            if stem in parts:
                return True
    return False


def _sets_up_through_project(t, index: ModuleIndex) -> bool:
    """The script joins a process group through a function of a project module it imports
    (`ext_dist.init_distributed(...)`, dlrm), which calls init_process_group."""
    for c in index.calls:
        q = c.qual or ""
        if "." not in q.lstrip(".") or q.split(".")[0] in ("torch", "os", "sys", "transformers", "accelerate"):
            continue
        module, name = q.rsplit(".", 1)
        found = t.sibling(module)
        if found is None or found[1] is index:
            continue
        fn = found[1].module.functions.get(name)
        if fn is not None and any(x.qual == "torch.distributed.init_process_group"
                                  for s in found[1].reachable(fn) for x in s.calls):
            return True
    return False


_SELF_GATING = ("trainer", "engine", "runner", "learner", "accelerator", "pipeline", "agent")


def _gates_itself(t, call: Call) -> bool:
    """`trainer.save_pretrained(out)` where the receiver is a trainer-like object, or an object of a
    project class whose own `save_pretrained` tests the rank: the method gates inside."""
    recv = (call.recv or "").rsplit(".", 1)[-1].lower()
    if any(w in recv for w in _SELF_GATING):
        return True
    if call.recv == "self" and call.scope.cls is not None:  # the class's own save_pretrained (trlx)
        method = call.scope.cls.functions.get(call.name or "")
        if method is not None:
            return any(t.facts.gated(t.index, c) or c.kw("is_main_process") is not None for c in method.calls)
    cls_name = None
    for a in call.scope.assigns:
        if call.recv in a.targets and a.call is not None:
            cls_name = (a.call.text or "").rsplit(".", 1)[-1]
    if not cls_name:
        return False
    found = t.facts.find_class(cls_name)
    if found is None:
        return False
    other, klass = found
    method = klass.functions.get(call.name or "")
    if method is None:
        return False
    return any(t.facts.gated(other, c) for c in method.calls)  # something in it runs under a rank test


def _family_gates(t, index: ModuleIndex, call: Call) -> bool:
    """The write sits in a method (`write_state_dict`) that the classes of one hierarchy call from a method
    of one name (`save`): where that method gates the call (FSDPTrainer.save: `if self.rank == 0:`), the
    versions that do not are the single-process trainers' (BasicTrainer.save), DPO's design."""
    fn = call.scope
    klass = fn.cls if fn is not None else None
    if klass is None or fn.kind != "function":
        return False
    family = {klass.name}
    classes = [(ix, c) for ix in t.facts.indexes.values() for c in ix.module.classes.values()]
    for _ in range(3):  # subclasses of subclasses
        family |= {c.name for _ix, c in classes
                   if any((dotted(b) or "").rsplit(".", 1)[-1] in family for b in c.node.bases)}
    callers = {}  # method name -> [gated?] over the family's calls of self.<fn>()
    for ix, c in classes:
        if c.name not in family:
            continue
        for m in c.functions.values():
            flags = [t.facts.gated(ix, x) for x in m.calls if x.recv == "self" and x.name == fn.name]
            if any(flags) and not all(flags):
                # one method calls it both under the rank test and outside it (y-akbal/One-for-All Trainer.train,
                # fr57: `if gpu_id == 0: self._save_checkpoint()` then `self._save_checkpoint()`): the ungated call
                # runs on every rank; that is not a family of trainers of which one gates
                return False
            if flags:
                callers.setdefault(m.name, []).extend(flags)
    return bool(callers) and all(any(g) for g in callers.values()) and any(not all(g) for g in callers.values())


def _writer_uses_gated(t, index: ModuleIndex, call: Call) -> bool:
    """`writer = SummaryWriter(...)` on every rank, but every `writer.add_*` / `writer.log` is under a rank
    gate: one empty event file per rank, no duplicate curves. `writer.close()` / `flush()` on every rank add no
    event (SummaryWriter.close flushes the pending events of its file writers, torch/utils/tensorboard/writer.py;
    ssr's train.py closes its writer ungated at the end)."""
    names = [n for a in index.assigns if a.call is call for n in a.targets if n]
    if not names:
        return False
    keys = {n if not n.startswith("self.") else n for n in names}
    attrs = {n.split(".", 1)[1] for n in names if n.startswith("self.")}
    uses = [c for c in index.calls if c is not call and c.recv and c.name not in ("close", "flush") and (
        c.recv in keys or (c.recv.startswith("self.") and c.recv.split(".", 1)[1] in attrs))]
    gated = t.facts.gated_functions(index, t.real_path)
    return bool(uses) and all(t.facts.gated(index, c) or id(c.scope) in gated for c in uses)


def _per_rank_site(call: Call) -> bool:
    """A call that passes a per-rank file name (`save_state_dict(d, f"rank{get_global_rank()}.pt", ...)`). The rank
    value itself (`train(model, loader, dist.get_rank())`, `int(os.environ["RANK"])`) is not a file name: it gates
    nothing (fr84 GaozhengPei/FreqPure, lint14b)."""
    for a in list(call.node.args) + [k.value for k in call.node.keywords]:
        if isinstance(a, ast.Call) and is_rankish(a):
            continue
        if isinstance(a, (ast.JoinedStr, ast.BinOp, ast.Call)) and any(
                isinstance(n, (ast.Name, ast.Attribute, ast.Call)) and is_rankish(n) for n in ast.walk(a)):
            return True
    return False


def _joins_later(scope, after: int, depth: int = 0) -> bool:
    """A call in `scope` after line `after` joins the process group: init_process_group itself, or a function of this
    module whose body does (three calls deep)."""
    if depth > 3 or scope is None:
        return False
    module = scope
    while module.parent is not None:
        module = module.parent
    for c in scope.calls:
        if c.line <= after:
            continue
        if c.qual == INIT_PG:
            return True
        fn = module.functions.get(c.name) if isinstance(c.node.func, ast.Name) else None
        if fn is not None and fn is not scope and _joins_later(fn, 0, depth + 1):
            return True
    return False


def _pre_group_mode_site(call: Call) -> bool:
    """Round 22 (fr150 Ivann1242/PAgent: `merge()` called under `if (...) and _is_main():` after training, and in
    `if args.merge_only: merge(...); return` before `train()` joins the group; LINT013 judged wrong at first read):
    a call site in an `if` branch that ends by returning (or exiting) before anything of its function joins the
    process group, while a call after the branch does. That branch is a mode of the script that never forms a world:
    one process, whatever the launcher. Only where nothing before the branch in the function joins."""
    scope = call.scope
    if scope is None or scope.kind != "function":
        return False
    if any(c.qual == INIT_PG and c.line < call.line for c in scope.calls):
        return False
    for node in ast.walk(scope.node):
        if not isinstance(node, ast.If) or not node.body or is_rankish(node.test):
            continue
        if not any(st is call.node or any(n is call.node for n in ast.walk(st)) for st in node.body):
            continue
        last = node.body[-1]
        ends = isinstance(last, ast.Return) or (
            isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and
            (dotted(last.value.func) or "") in ("sys.exit", "exit", "quit", "os._exit")) or (
            isinstance(last, ast.Raise) and "SystemExit" in (dotted(getattr(last.exc, "func", last.exc)) or ""))
        if ends and _joins_later(scope, getattr(node, "end_lineno", node.lineno)):
            return True
    return False


def _launcher_parent_site(call: Call) -> bool:
    """Round 23 (fr157 natashaoberoi/FFU: `save_checkpoint()` called under `if rank == 0:` in the spawned worker, and
    in `run_fallback_training()`, which only `main()` calls, in the `except` of its `mp.spawn(main_worker, ...)`;
    LINT013 judged wrong at first read): a call site in a function that starts the ranks with
    torch.multiprocessing.spawn / start_processes and never joins the process group itself (nor through a function
    of this module it calls). torch/multiprocessing/spawn.py start_processes runs `fn` in the child processes and
    the parent only waits in `context.join()`: the parent is one process, not a rank. Functions called only from
    such sites are one-process too (facts.gated_functions follows the callers)."""
    scope = call.scope
    if scope is None or scope.kind != "function":
        return False
    if call.qual in SPAWN or call.name in ("spawn", "start_processes", "Process", "Pool", "submit", "apply_async"):
        return False  # the launch itself hands its target to the ranks (a site of the target): not one process
    if not any(c.qual in SPAWN for c in scope.calls):
        return False
    return not _joins_later(scope, 0)


def _safe_site(call: Call) -> bool:
    """A call site LINT013 counts as safe besides a gated one: a per-rank file name, a pre-group mode, or the
    parent of a spawn launch."""
    return _per_rank_site(call) or _pre_group_mode_site(call) or _launcher_parent_site(call)


def gated_functions(index: ModuleIndex, t=None) -> Set[int]:
    """Functions of this file whose every call site is under a rank test (directly or transitively),
    or passes a per-rank file name, including callers in other modules linted in the same run
    (facts.ProjectFacts)."""
    if t is not None:
        return t.facts.gated_functions(index, t.real_path, also=_safe_site)
    return gated_scopes(index, None)


_METADATA = ("args", "training_args", "hparams", "opt", "opts", "cfg", "config")


def _metadata(call: Call) -> bool:
    """`torch.save(args, ".../training_args.bin")`, `torch.save({}, placeholder)`: a few bytes of
    metadata. Every rank writing it is a race on a file nobody reads back for weights: a note."""
    if call.name == "open" and call.qual in (None, "open", "builtins.open"):
        return _settings_written(call) or _same_bytes(call)
    if call.name == "save_pretrained":
        if _save_function_gated(call) == "config":
            return True   # the weights through accelerator.save (main process only): only config files are raced
        recv = (call.recv or "").rsplit(".", 1)[-1].lower()
        func = call.node.func
        if not recv and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and \
                last_name(func.value.func) == "from_pretrained" and isinstance(func.value.func, ast.Attribute):
            # `DebertaV2Config.from_pretrained(name).save_pretrained(out)` (round 21, fr138 KoDPR): the class named
            recv = ((dotted(func.value.func.value) or "").rsplit(".", 1)[-1]).lower()
        return any(recv.endswith(w) or recv.startswith(w) for w in _SMALL_SAVES)
    if call.qual in ("shutil.copy", "shutil.copy2", "shutil.copyfile") and call.node.args:
        return _own_code(call.node.args[0]) or _settings_file(call.node.args[0])
    if call.name == "write_text" and call.node.args:
        return _loaded_back(call.scope, call.node.args[0])
    if call.qual not in ("torch.save", "json.dump"):
        return False
    obj = call.arg(0, "obj")
    if call.qual == "json.dump" and (isinstance(obj, ast.Call) and last_name(obj.func) == "vars" or
                                     isinstance(obj, ast.Attribute) and obj.attr == "__dict__"):
        return True   # `json.dump(a.__dict__, f)`: an object's attributes as JSON, the run's settings (fr148 CLAPS)
    if isinstance(obj, ast.Call) and last_name(obj.func) == "vars":  # `torch.save(vars(args), p)`
        obj = obj.args[0] if obj.args else obj
    if isinstance(obj, ast.Attribute) and obj.attr == "__dict__":  # `torch.save(args.__dict__, p)`
        obj = obj.value
    if isinstance(obj, (ast.Dict, ast.List, ast.Tuple)) and not getattr(obj, "keys", None) and not getattr(
            obj, "elts", None):
        return True
    name = (dotted(obj) or "").rsplit(".", 1)[-1].lower() if obj is not None else ""
    if name in _METADATA:
        return True
    if isinstance(obj, ast.Dict) and obj.values and all(isinstance(v, ast.Constant) or any(
            isinstance(n, ast.Name) and any(p in _METADATA for p in n.id.lower().split("_")) for n in ast.walk(v))
            for v in obj.values):
        return True   # `json.dump({"training_config": asdict(config_to_save), ...}, f)` (round 21, fr136 Vaani)
    if call.qual == "json.dump" and isinstance(obj, ast.Name):
        # `args_dict = vars(args); json.dump(args_dict, f)`, `json.dump(ds_config, f)`: the run's settings as JSON
        if any(piece in _METADATA for piece in name.split("_")):
            return True
        for a in call.scope.assigns:
            v = a.value
            if obj.id in a.targets and v is not None and (
                    (isinstance(v, ast.Call) and last_name(v.func) == "vars") or
                    (isinstance(v, ast.Attribute) and v.attr == "__dict__")):
                return True
    return False


@functools.lru_cache(maxsize=1)
def _save_function_facts() -> dict:
    with open(_WRITERS_FILE, encoding="utf-8") as fh:
        return json.load(fh)["save_pretrained_save_function"]


def weights_every_caller(call: Call) -> bool:
    """`model.save_pretrained(out, is_main_process=...)` that still writes the weights on every caller: is_main_process
    gates the config files only, and the shards go through safe_save_file on every process unless
    safe_serialization=False hands them to a save_function that gates itself (accelerator.save). Round 22: fr139
    DimaErmakov/finetune-Qwen2.5-VL-7B, whose own comment reports a second run folder holding model.safetensors, and
    Y0sem1te/DRAD x3 (LINT038 judged debatable on the reading that only empty folders appear)."""
    if call.name != "save_pretrained" or call.kw("is_main_process") is None:
        return False
    safe = call.kw("safe_serialization")
    if not (isinstance(safe, ast.Constant) and safe.value is False):
        return True
    fn = dotted(call.kw("save_function")) or ""
    return not (fn.endswith(".save") and "accelerat" in fn.rsplit(".", 1)[0].lower())


def _save_function_gated(call: Call) -> Optional[str]:
    """`model.save_pretrained(out, save_function=accelerator.save)` with no is_main_process (round 22, fr151
    SparkJiao/MERIt x2, fr130: the HF no_trainer examples' save). accelerate's save writes on the main process only,
    but transformers' save_pretrained hands the shards to save_function only with safe_serialization=False, and
    writes the config wherever is_main_process is left True (data/lint_writers.json save_pretrained_save_function,
    with the sources). "config": safe_serialization=False, only the config files are raced (a note); "weights": the
    default, every rank writes the safetensors weights too; None: no accelerator save_function."""
    if call.name != "save_pretrained" or call.kw("is_main_process") is not None:
        return None
    fn = dotted(call.kw("save_function")) or ""
    if not (fn.endswith(".save") and "accelerat" in fn.rsplit(".", 1)[0].lower()):
        return None
    safe = call.kw("safe_serialization")
    return "config" if isinstance(safe, ast.Constant) and safe.value is False else "weights"


_SETTINGS_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".conf")


def _settings_file(src: ast.AST) -> bool:
    """Round 26 (fr149 T2IAdapter-XL `shutil.copy(args.config, args.output_dir)`): the source of a copy is the run's
    settings file - a name or attribute whose last piece is a settings word (`args.config`, `cfg_path`), or a literal
    path ending in a settings suffix. Every rank copies the same bytes of a small file: a race with nothing lost."""
    if isinstance(src, ast.Constant) and isinstance(src.value, str):
        return src.value.lower().endswith(_SETTINGS_SUFFIXES)
    if isinstance(src, (ast.Name, ast.Attribute)):
        name = (dotted(src) or "").rsplit(".", 1)[-1].lower()
        return name in _METADATA or any(piece in _METADATA for piece in name.split("_"))
    return False


def _loaded_back(scope, e: ast.AST) -> bool:
    """Round 26 (fr148 yolov7, fr149 yolov5face: `results_file.write_text(ckpt['training_results'])` on resume): the
    value is read out of the object `torch.load` returned last above it in the same function (`ckpt[key]`, `ckpt.get(key)`). Every
    rank loads the same file, so every rank writes the same bytes."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get":
        base = e.func.value
    elif isinstance(e, ast.Subscript):
        base = e.value
    else:
        return False
    if not isinstance(base, ast.Name):
        return False
    before = [a for a in scope.assigns if base.id in a.targets and getattr(a.node, "lineno", 0) < e.lineno]
    if not before:
        return False
    v = max(before, key=lambda a: a.node.lineno).value  # the assignment last above the write (a later dict is a save)
    return isinstance(v, ast.Call) and (dotted(v.func) or "") == "torch.load"


def _own_code(src: ast.AST) -> bool:
    """The source of a copy is the run's own code: `__file__`, `sys.argv[0]`, `inspect.getfile(cls)`, a literal
    `"./main_ddp.py"` (through os.path.abspath/realpath too). Every rank copies the same bytes into the run folder
    (fr122 gufranSabri/MM_SLT x2, judged debatable): a race whose every writer writes the same file, a note."""
    node = src
    while isinstance(node, ast.Call) and last_name(node.func) in ("abspath", "realpath", "normpath", "Path", "str") \
            and node.args:
        node = node.args[0]
    if isinstance(node, ast.Name) and node.id == "__file__":
        return True
    if isinstance(node, ast.Subscript) and dotted(node.value) == "sys.argv":
        return True
    if isinstance(node, ast.Call) and (dotted(node.func) or "") in ("inspect.getfile", "inspect.getsourcefile"):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".py")


_WRITE_CALLS = ("write", "writelines", "writerow", "writerows")


def _with_body(call: Call) -> Optional[list]:
    """The body of the `with` statement whose context expression is `call` (`with open(p, "w") as f: ...`), or None
    when the call is not a `with` item."""
    for node in ast.walk(call.scope.node):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(i.context_expr is call.node for i in node.items):
            return node.body
    return None


def _same_bytes(call: Call) -> bool:
    """Round 21 (fr137 vits-accelerate, fr138 SDoRA): a file opened for writing that receives only what is the same
    on every rank - literals (a CSV header row, a fixed line) or the text of another file read whole
    (`data = open(config_path).read()`; `f.write(data)`): every rank writes the same bytes, a race with nothing lost."""
    body = _with_body(call)
    if body is None:
        return False
    reads = {t for a in call.scope.assigns if isinstance(a.value, ast.Call) and last_name(a.value.func) == "read"
             and not a.value.args for t in a.targets if t}
    others = {t for a in call.scope.assigns if not (isinstance(a.value, ast.Call) and
                                                    last_name(a.value.func) == "read") for t in a.targets if t}

    def fixed(e: ast.AST) -> bool:
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            return all(fixed(x) for x in e.elts)
        if isinstance(e, ast.JoinedStr):
            return all(isinstance(v, ast.Constant) for v in e.values)
        if isinstance(e, ast.BinOp):
            return fixed(e.left) and fixed(e.right)
        if _loaded_back(call.scope, e):
            return True   # `f.write(ckpt['training_results'])`: read back from the checkpoint every rank loaded
        if _same_everywhere(e, call.scope, frozenset()):
            return True   # text derived only from what every rank computes alike (ImageFolder's class_to_idx)
        return isinstance(e, ast.Name) and e.id in reads and e.id not in others

    writes = 0
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, ast.Call) and last_name(n.func) in _WRITE_CALLS:
                if not n.args or not all(fixed(a) for a in n.args):
                    return False
                writes += 1
            elif isinstance(n, ast.Call) and last_name(n.func) in ("dump", "safe_dump", "save", "print"):
                return False
    return writes > 0


@functools.lru_cache(maxsize=1)
def _same_attributes() -> Dict[str, frozenset]:
    """made_by qual -> the attributes the same in every process (data/lint_writers.json same_on_every_rank)."""
    with open(_WRITERS_FILE, encoding="utf-8") as fh:
        entries = json.load(fh)["same_on_every_rank"]["attributes"]
    return {q: frozenset(e["attrs"]) for e in entries for q in e["made_by"]}


_PURE_CALLS = ("json.dumps", "dict", "sorted", "list", "tuple", "str", "len", "enumerate", "zip", "range", "int")
_PURE_METHODS = ("items", "keys", "values", "join", "format")


def _same_everywhere(e: ast.AST, scope, bound: frozenset, depth: int = 0) -> bool:
    """Round 22 (fr141 csds438-f21-project/Resnet_Car_Recognition: `cla_dict = dict((v, k) for k, v in
    train_dataset.class_to_idx.items()); json_str = json.dumps(cla_dict, indent=4)` then `json_file.write(json_str)`
    on every Ray worker, judged debatable): an expression built only from constants, pure builtins and comprehensions
    over attributes every process computes alike from the same arguments (data/lint_writers.json
    same_on_every_rank: torchvision's ImageFolder.class_to_idx, a sorted folder listing), through the names the
    function assigns. At least one such attribute must be read: a bare constant is the older literal check's."""
    return _pure(e, scope, bound, depth) == "attr"


_MUTATORS = ("update", "append", "extend", "insert", "setdefault", "pop", "add", "__setitem__", "write")


def _mutated(scope, name: str) -> bool:
    """`d[k] = v`, `d.x = v`, `d[k] += v`, `d.update(...)`: the name's object is changed after its assignment."""
    for n in ast.walk(scope.node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign,
                                                                                          ast.AnnAssign)) else []
        for tg in targets:
            if isinstance(tg, (ast.Subscript, ast.Attribute)) and isinstance(tg.value, ast.Name) and \
                    tg.value.id == name:
                return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MUTATORS and \
                isinstance(n.func.value, ast.Name) and n.func.value.id == name:
            return True
    return False


def _pure(e: ast.AST, scope, bound: frozenset, depth: int) -> Optional[str]:
    """None: not known pure; "const": pure and constant; "attr": pure and reads a same-everywhere attribute."""
    if depth > 12 or e is None:
        return None
    parts: list = []
    if isinstance(e, ast.Constant):
        return "const"
    if isinstance(e, ast.Name):
        if e.id in bound:
            return "const"
        value = scope.values.get(e.id)
        if value is None or sum(1 for a in scope.assigns if e.id in a.targets) != 1 or _mutated(scope, e.id):
            return None
        return _pure(value, scope, bound, depth + 1)
    if isinstance(e, ast.Attribute):
        base = e.value
        if isinstance(base, ast.Name) and base.id in scope.values:
            made = scope.values[base.id]
            qual = next((c.qual for c in scope.calls if isinstance(made, ast.Call) and c.line == made.lineno and
                         c.node.col_offset == made.col_offset), None)
            if qual and e.attr in _same_attributes().get(qual, ()):
                return "attr"
        return None
    if isinstance(e, (ast.Tuple, ast.List)):
        parts = list(e.elts)
    elif isinstance(e, ast.Call):
        name = dotted(e.func) or ""
        if isinstance(e.func, ast.Attribute) and e.func.attr in _PURE_METHODS:
            parts = [e.func.value]
        elif name not in _PURE_CALLS:
            return None
        parts += list(e.args) + [k.value for k in e.keywords]
    elif isinstance(e, (ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        names = set(bound)
        for g in e.generators:
            parts.append(g.iter)
            parts += list(g.ifs)
            names |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        inner = [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
        got = [_pure(x, scope, bound, depth + 1) for x in parts] + [_pure(x, scope, frozenset(names), depth + 1)
                                                                    for x in inner]
        return None if None in got else ("attr" if "attr" in got else "const")
    elif isinstance(e, ast.Subscript):
        parts = [e.value, e.slice]
    else:
        return None
    got = [_pure(x, scope, bound, depth + 1) for x in parts]
    return None if None in got else ("attr" if "attr" in got else "const")


def _settings_written(call: Call) -> bool:
    """`with open(d / "args.yaml", "w") as f: yaml.safe_dump(args, f)` / `f.write(str(args))`: what the file
    receives is the run's settings (a name of _METADATA, `vars(args)`, `args.__dict__`): a small metadata file."""
    body = _with_body(call)
    if body is None:
        parent_calls = [c for c in call.scope.calls if c.node is not call.node and c.name == "write" and
                        isinstance(c.node.func, ast.Attribute) and c.node.func.value is call.node]
        exprs = [a for c in parent_calls for a in c.node.args]
    else:
        exprs = [a for st in body for n in ast.walk(st) if isinstance(n, ast.Call) for a in n.args]
    for a in exprs:
        for n in ast.walk(a):
            name = (dotted(n) or "").rsplit(".", 1)[-1].lower() if isinstance(n, (ast.Name, ast.Attribute)) else ""
            if name in _METADATA or name == "__dict__":
                return True
            if isinstance(n, ast.Name) and any(piece in _METADATA for piece in name.split("_")):
                return True   # `json.dump(asdict(config_to_save), f)` (round 21, fr136 Vaani: the run's settings)
    return False


def _launched_by_project(t) -> bool:
    """The project's README or shell scripts launch this file as several processes (`torchrun --nproc_per_node=8
    train_tts.py`, `accelerate launch`, `deepspeed`): every line outside a gate runs once per process, whether or not
    the file itself names a process group (fr113 SebastianBodza/LLaSA_training: a Trainer script whose README runs it
    under torchrun, `tokenizer.save_pretrained(out)` after `trainer.train()` on every rank, both readers)."""
    ctx = t.context
    return ctx is not None and ctx.multi_process(t.real_path) is not None


def _trains(index: ModuleIndex) -> bool:
    """A training script: a hand-written loop (`.backward()`), or a Trainer/accelerate run."""
    if "backward" in index.by_name:
        return True
    if is_trainer_script(index) and "train" in index.by_name:
        return True
    # a trainer object of a module not linted takes the step (`student_trainer.train_step(batch)`, kdsml, fr54);
    # round 21: a Lightning Trainer that re-runs the script per rank, and its `trainer.fit(...)`
    if lightning_relaunch(index) is not None and any(Reach._train_marker(c) for c in index.by_name.get("fit", ())):
        return True
    return any(Reach._train_marker(c) for name in _STEP_NAMES + tuple(step_methods()) for c in index.by_name.get(name, ()))


_STEP_NAMES = ("train_step", "training_step", "train_epoch", "train_one_epoch", "train_batch")


_SHARDED_FIX = (
    "# {how}: every rank holds a shard, so every rank must take part in gathering the weights;\n"
    "# do not put the call under a rank-0 `if` (the other ranks would wait forever). Let one rank write:\n"
    "model.save_pretrained(out_dir, is_main_process=accelerator.is_main_process,\n"
    "                      state_dict=accelerator.get_state_dict(model), save_function=accelerator.save)\n"
    "# (Trainer: trainer.save_model(out_dir); plain torch: torch.distributed.checkpoint, or\n"
    "#  get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)) on every rank, then save on rank 0)")

_SHARDED_TORCH_SAVE_FIX = (
    "# {how}: gather on every rank, write on one. With FSDP (torch.distributed.fsdp):\n"
    "cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)\n"
    "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):\n"
    "    state = model.state_dict()          # every rank: this is a collective\n"
    "if dist.get_rank() == 0:\n"
    "    torch.save(state, path)             # one writer\n"
    "# (or torch.distributed.checkpoint.save(...), which every rank calls and which writes shards)")


# The Trainer calls save_model on every process: transformers src/transformers/trainer.py (v5.25.0, as installed
# here): `_save_checkpoint` runs `self.save_model(output_dir, _internal_call=True)` with no rank test, and the base
# `save_model` decides who writes with `self.args.should_save` ("Will only save from the main process"). An override
# that writes without such a test writes on every process of a multi-process run.
_TRAINER_ROOTS = ("transformers", "trl")
_PROCESS_TESTS = ("should_save", "is_world_process_zero", "is_local_process_zero", "is_main_process", "local_rank",
                  "process_index", "get_rank", "is_master", "rank")


def _trainer_save_overrides(t):
    """A Trainer subclass whose `save_model` (or a method of the class it calls) writes a file with no process test:
    the Trainer calls save_model on every process (fr66 MuyaoLi-jimo/markov_lora, both readers). A note: whether the
    script runs as several processes is not shown here."""
    index = t.index
    for klass in index.module.classes.values():
        bases = index.class_bases(klass)
        if not any(b.lstrip("?").split(".")[0] in _TRAINER_ROOTS and b.rsplit(".", 1)[-1].endswith("Trainer")
                   for b in bases):
            continue
        fn = klass.functions.get("save_model")
        if fn is None:
            continue
        scopes = [fn] + [klass.functions[c.name] for c in fn.calls
                         if c.recv == "self" and c.name in klass.functions and c.name != "save_model"]
        if any(isinstance(n, (ast.Name, ast.Attribute)) and (last_name(n) or "") in _PROCESS_TESTS
               for sc in scopes for n in ast.walk(sc.node)):
            continue
        writes = [c for sc in scopes for c in sc.calls if _write_kind(c) is not None]
        if not writes:
            continue
        call = writes[0]
        yield t.finding(
            "info", call.node,
            f"{_write_kind(call)} in {klass.name}.save_model(), which the Trainer calls on every process "
            "(_save_checkpoint), with no should_save test: every process writes it",
            detail=("transformers' Trainer._save_checkpoint calls self.save_model(output_dir, _internal_call=True) on "
                    "every process and the base save_model writes only where self.args.should_save holds; this "
                    "override drops that test (src/transformers/trainer.py)."),
            fix="if self.args.should_save:   # in the override, around the writes\n    torch.save(state_dict, path)",
            evidence={"class": klass.name, "method": "save_model"},
        )


# Tests that say "no process group" (`not dist.is_initialized()`): a main-process test built on one
# (`return not dist.is_initialized() or dist.get_rank() == 0`) is true on every rank once the group is destroyed.
_GROUP_UP = {"is_initialized", "is_dist_avail_and_initialized", "is_dist_initialized", "dist_is_initialized"}


def _no_group(test: ast.AST) -> bool:
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call) \
        and last_name(test.operand.func) in _GROUP_UP


def _true_without_group(fn: ast.AST) -> bool:
    """`return not dist.is_initialized() or rank == 0`, or `if not dist.is_initialized(): return True`."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.BoolOp) and isinstance(node.value.op, ast.Or) \
                and any(_no_group(v) for v in node.value.values):
            return True
        if isinstance(node, ast.If) and _no_group(node.test) and node.body and isinstance(node.body[0], ast.Return) \
                and isinstance(node.body[0].value, ast.Constant) and node.body[0].value.value is True:
            return True
    return False


def _destroys(index: ModuleIndex, call: Call, depth: int = 0) -> bool:
    """The call destroys the process group: `dist.destroy_process_group()` or a function of this file that does."""
    if call.name == "destroy_process_group":
        return True
    fn = index.callee(call) if depth < 3 else None
    return fn is not None and any(_destroys(index, c, depth + 1) for c in fn.calls)


def gate_after_destroy(index: ModuleIndex, call: Call) -> Optional[Tuple[str, int]]:
    """(the gate, the line of the destroy) when `call` is gated only by a project main-process test that is
    true without a process group, and the same function destroyed the group on an earlier line (the final save
    after `cleanup()`, fr64 APT)."""
    tests = [test for test, arm in call.ctx.branch if arm == 0]
    for test in reversed(tests):
        calls = [n for n in ast.walk(test) if isinstance(n, ast.Call)]
        for c in calls:
            fn = index.function_of(c.func, call.scope)
            if fn is None or not _true_without_group(fn.node):
                continue
            gate_line = getattr(test, "lineno", call.line)
            earlier = [d.line for d in call.scope.calls if d.line < gate_line and _destroys(index, d)]
            if earlier:
                return dotted(c.func) or "the test", max(earlier)
    return None


@rule("LINT013", "write-on-every-rank", catalogue=("F12",))
def write_on_every_rank(t):
    """Checkpoints or experiment logs written without a rank-0 gate in a manual distributed loop.

    What it checks
        In a distributed script with a hand-written loop (it calls `.backward()`): `torch.save`,
        `save_pretrained` (without `is_main_process=`), `wandb.init`/`wandb.log`, a TensorBoard
        `SummaryWriter` or `mlflow.log_*`, or a file writer of the catalogue ddpdoctor/data/lint_writers.json
        (`np.save`/`savez`/`savetxt`, `DataFrame.to_csv(path)`, `json.dump` into a file opened for writing,
        `logging.FileHandler`, PIL `Image.save` on an image made by `Image.fromarray/open/new`; each with where its
        write was read in numpy/pandas/CPython/Pillow; wandb also through an attribute that holds the module,
        `self.wandb = wandb`), not under a
        test of the rank or main-process status (or
        after `if rank != 0: return`, or in a function only called under one, also from another
        module linted in the same run), and not to a per-rank path, an in-memory buffer or a
        temporary file, nor an empty marker (`with open(done, "w"): pass`, round 18). A call of a helper of an imported project module that is not linted with the script
        (`create_experiment_dir(...)`, `make_writer(path)`) counts as the write the helper does without a rank
        test of its own (one fact per helper, computed once per run); it is reported at the call.
        Consecutive writes in one block are one finding. Saving the script's
        own arguments (`torch.save(args, "training_args.bin")`, `json.dump(vars(args), f)`), an empty
        placeholder, or (round 19) a copy of the run's own code (`shutil.copy2(__file__, out_dir)`) is a note; so is (round
        21) a file that receives only literals or another file's text read whole (a CSV header, a copied
        config.json), a settings dict (`json.dump({"cfg": asdict(config)}, f)`) and a Config re-saved from its hub
        name: every rank writes the same bytes; so are (round 26) a copy of a settings file (`shutil.copy(args.config,
        out)`), an object's attributes as JSON (`json.dump(a.__dict__, f)`) and text read back from the checkpoint
        every rank loaded (`results_file.write_text(ckpt['training_results'])`, YOLOv5's resume). Since round 21 a Lightning Trainer whose strategy re-runs the
        script per rank (`strategy="ddp"`, not ddp_spawn; several devices with no strategy: Lightning >= 2.0 picks
        ddp; data/launchers.json lightning_script_relaunch) and its `trainer.fit` make the script's own code
        every-rank. Horovod's `hvd.init()` counts as joining a process group. A Trainer or accelerate
        script counts when it is launched as several processes (torchrun, `accelerate launch`:
        it reads LOCAL_RANK/WORLD_SIZE or passes ddp/fsdp/deepspeed settings, or, since round 18, the project's
        README or shell scripts launch the file that way, and since round 19 `srun python train.py` / `mpirun -np N` with
        more than one task, counted from the line or the batch script's #SBATCH lines); `trainer.save_model`
        and `save_pretrained(..., is_main_process=...)` are already gated. For a sharded model
        (FSDP, ZeRO-3, tensor parallel) the fix keeps the call on every rank and lets one write.
        The gates are the project's (facts computed once per run): flags that hold a rank test in a
        config field or attribute set in another module, methods returning one
        (`is_root_worker()`), objects that exist on rank 0 only (`wandb.run`; not a field of the parsed
        arguments, which every rank holds before rank 0 reassigns it), the single-process
        branch of `if ddp:`, helpers every caller gates (also through objects, thread targets and
        other modules), per-rank shard names built in variables or path functions. Dead code, a
        trainer's own `save_pretrained`, a writer whose writes are all gated, a Dataset's cache and
        a library method nothing calls (a note) are not reported as every-rank writes; nor are a write in
        the parent process that spawns the ranks (before `mp.spawn`), code in a branch no caller takes
        (`if kind == "toy":` when every call passes another constant), and wandb runs grouped per process
        (every `wandb.init` passes `group=`, W&B's documented multi-process pattern). Since round 22 a helper
        call site in a branch that returns before its function joins the group (a one-process mode) counts as
        gated, and `save_pretrained(save_function=accelerator.save)` says what is raced: only config.json with
        safe_serialization=False (a note), the safetensors weights too by default (data/lint_writers.json); a
        file that receives only text derived from attributes every rank computes alike (ImageFolder's
        class_to_idx through json.dumps of a comprehension) is the same bytes: a note. Since round 23 (lint30) a
        log file whose logger receives every record of the script under a rank test is a note, a write inside a
        function names the function's ungated call sites of the same file (evidence `lines`), and a save helper of a
        project module that is not linted, handed a `state_dict()` on every rank (`save_checkpoint({'state_dict':
        model.module.state_dict()}, is_best)`, data/lint_writers.json unread_save_helpers), is a note.

    Why it matters
        Every rank runs the same code: N ranks write the same checkpoint file at once (clobbered or
        corrupt files on shared storage), open N wandb runs and N TensorBoard event files with
        duplicate curves. The Trainer gates these on `args.should_save` / `should_log`
        (process_index == 0, transformers `training_args.py`); a manual loop must do it itself.

    Example
        for epoch in range(epochs):
            train_one_epoch(model, loader)
            torch.save(model.state_dict(), "ckpt.pt")

    Fix
        Gate on the global rank: `if dist.get_rank() == 0: torch.save(model.module.state_dict(),
        "ckpt.pt")`, followed by `dist.barrier()` if the others read it; with accelerate use
        `accelerator.save(...)` and `if accelerator.is_main_process:`.
    """
    index = t.index
    yield from _trainer_save_overrides(t)
    if not (_trains(index) or t.facts.trains()):
        return
    # distributed: this file, or (a helper module called by the run's distributed script) the run
    helper = _imported_by_others(t, index)  # a module the run's other files import, not an entry script
    if not (is_distributed(index) or launched_distributed(index) or _launched_by_project(t) or (
            helper and len(t.facts.indexes) > 1 and t.facts.distributed_anywhere(is_distributed)) or
            _sets_up_through_project(t, index) or lightning_relaunch(index) is not None):
        return   # (round 21: a Lightning Trainer whose strategy re-runs this script on every rank)
    how = -1  # how the model is sharded: looked up once, at the first finding
    gated = None
    last = None  # the write last reported: consecutive writes of one block are one finding
    last_small = False
    scratch = scratch_names(index)
    for call in index.calls:
        what = _write_kind(call)
        helper_small = unread = False
        if what is None:
            helper = _helper_write_kind(t, index, call)  # the write lives in a helper of an unlinted project module
            if helper is not None:
                what, helper_small = helper
            else:
                what = _unread_save_helper(t, index, call)
                unread = what is not None
        if what is None or (_per_rank_site(call) if unread else (
                _per_rank_path(call, index) or _per_rank_parameter(t, call))):
            continue  # (an unread helper: only a per-rank file name in its own arguments, `f"ckpt_{rank}.pt"`)
        if t.facts.gated(index, call):
            lapsed = gate_after_destroy(index, call) if call.ctx.gated else None
            if lapsed is not None:
                yield t.finding(
                    "info", call.node,
                    f"{what} runs on every rank: `{lapsed[0]}()` is true on every process once the process group "
                    f"is gone (destroyed on line {lapsed[1]})",
                    detail=(f"The gate tests `not dist.is_initialized() or <rank> == 0`; after "
                            "destroy_process_group() the first half is true on every rank, so each process writes."),
                    fix=("Decide who writes before the group goes: `is_main = dist.get_rank() == 0` while it exists,\n"
                         "then `if is_main: ...` after cleanup (or save before destroying the group)."),
                    evidence={"writes": what, "gate": lapsed[0], "destroyed_line": lapsed[1]},
                )
            continue
        entry = catalogued(call)
        if what == "torch.save" and _scratch_target(call, scratch):
            continue
        if entry is not None and any(_scratch_expr(x, scratch) for x in _catalogue_target(call, entry) or []):
            continue
        if gated is None:
            gated = gated_functions(index, t)
        if id(call.scope) in gated or t.facts.dead(call.scope, index) or reach(t).branch_never_taken(index, call):
            continue  # every caller gates it, nothing calls it, or no caller takes its branch
        if call.name == "save_pretrained" and (_gates_itself(t, call) or reach(t).targets(index, call)):
            continue  # the project's own save_pretrained: its writes are judged where they are
        if _family_gates(t, index, call):
            continue
        if (what == "torch.save" or (entry is not None and entry["kind"] == "data")) and _in_dataset(index, call):
            continue  # a Dataset caching what it computed for the samples this rank reads (spectrograms, features)
        if what == "SummaryWriter" and _writer_uses_gated(t, index, call):
            continue
        if reach(t).in_launcher(index, call):
            continue  # the parent process that spawns the ranks writes it, once
        if what.startswith("wandb") and _wandb_grouped(t):
            continue  # one grouped wandb run per process, by design
        if how == -1:
            how = sharded(index)
        if last is not None and last.scope is call.scope and (last.ctx.branch == call.ctx.branch or exclusive(
                last.ctx, call.ctx)) and call.line - (getattr(last.node, "end_lineno", None) or last.line) <= 2 and \
                (_metadata(call) or helper_small) == last_small:
            last = call  # the next line of the same block writes too (`torch.save(a, p1); torch.save(b, p2)`)
            continue
        last = call
        small = last_small = _metadata(call) or helper_small
        through = _save_function_gated(call)
        through_text = "" if through is None else (
            " (save_function=accelerator.save writes the weights once; every rank writes config.json, "
            "is_main_process being left True)" if through == "config" else
            " (save_function=accelerator.save does not gate it: with safe_serialization, True by default from "
            f"transformers {_save_function_facts()['safe_serialization_default_true_from']}, every rank writes the "
            "safetensors weights itself, and config.json where is_main_process is left True)")
        api = _library_method(t, index, call)  # `RLHFTrainer.save()`: whoever calls it decides where it runs
        # A warning needs positive evidence: the write is reached from the entry of a run that joins a process
        # group and trains, through conditions that are the same on every rank, and nothing in the call itself
        # depends on the rank (`wandb.init(mode="disabled" if rank else None)`). Anything less is a note.
        proof = reach(t).every_rank(index, call) if not (small or api or unread) else None
        ranked = reach(t).ranked_argument(index, call)
        quieted = (_handler_quieted_off_rank0(call, t.facts.flags(index)) if what == "logging.FileHandler" else None) or \
            (_handler_records_gated(t, index, call) if what.startswith("logging.") else None)
        ranked = ranked or bool(quieted)
        chosen = proof is not None and not ranked and reach(t).ranked_callee(index, call)
        gasp = last_gasp(call)
        warn = proof is not None and not ranked and not chosen and not gasp
        why = (proof.text() if warn else
               "a crash dump or exit path, not the training path" if gasp and proof is not None else
               f"only rank 0 writes its records: {quieted}" if quieted and proof is not None else
               "an argument of the call depends on the rank" if ranked and proof is not None else
               f"`{dotted(call.node.func)}` is bound under a test of the rank (a stand-in off rank 0?)" if chosen else
               "the helper's body was not read: a guess from its name" if unread else
               "" if small or api else reach(t).why_not(index, call))
        sites = _call_sites(t, index, call)
        yield t.finding(
            "warning" if warn else "info", call.node,
            f"{what} runs on every rank; only rank 0 should write it"
            + (" (a small metadata file: a race, not lost work)" if small else "")
            + through_text
            + (f" (in {api}, which nothing in the files linted calls: the caller decides)" if api else "")
            + ("" if warn or small or api else " (if it runs on every rank: " + why + ")"),
            detail=(f"Nothing around this {what} call tests the rank, so each process of the job does it: the same "
                    "file written N times at once, or N runs/event files with duplicate logs."),
            fix=(_SHARDED_TORCH_SAVE_FIX if what == "torch.save" else _SHARDED_FIX).format(how=how)
            if how and entry is None and not what.startswith(("wandb", "mlflow", "SummaryWriter")) else (
                "if torch.distributed.get_rank() == 0:   # or: if accelerator.is_main_process:\n"
                f"    ...  # the {what} call\n"
                "torch.distributed.barrier()   # if other ranks read what was written"),
            evidence={"writes": what, "sharded": how, "every_rank": proof.as_dict() if warn else None,
                      "why": why, **({"save_function": through} if through else {}),
                      **({"lines": sites} if sites else {})},
        )
