"""The package's shape: one package per stage, layered; no import cycle; the command line alone
speaks in flags; only the tuning records spell what a study stores."""

from __future__ import annotations

import ast
import re
from collections.abc import Container
from pathlib import Path

from tuner.tuning.core import records

PACKAGE = Path(__file__).resolve().parents[1] / "tuner"
#: The stages from the bottom up: a package may import its own layer and the layers below it,
#: never one above. (``__init__.py`` of ``tuner`` itself re-exports the public API.)
LAYERS = (
    {"_version", "errors", "schema", "_plugins", "_faults"},
    {"_io"},
    {"text"},
    {"llm"},
    {"embedding"},
    {"data"},
    {"chunkers"},
    {"retrieval"},
    {"evaluation"},
    {"tuning"},
    {"deploy", "reporting", "review"},
    {"api"},
    {"cli", "__main__"},
)
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}
#: Inside ``tuning/``, its subpackages from the bottom up (issue 52): the core of records and the
#: objective; scoring and search on it; the study; the outcome a user reads; the run on top. A module
#: may import its own layer and those below (``tuning/__init__.py`` re-exports the public names).
TUNING_LAYERS = ({"core"}, {"scoring", "search"}, {"study"}, {"outcome"}, {"run"})
TUNING_LAYER_OF = {name: level for level, names in enumerate(TUNING_LAYERS) for name in names}
#: The longest a module may grow: one concern per module (issue 52, item 2); tuning/'s are shorter.
MAX_MODULE_LINES = 500
MAX_TUNING_MODULE_LINES = 400
#: What a study stores, by name: only tuning/records.py may spell these out.
ATTRIBUTE_NAMES = {value for name, value in vars(records).items() if name.endswith("_ATTR") and isinstance(value, str)}
#: Words that are also keys of other schemas, not checked: the configuration schema shared with
#: exports ("config", "chunker", "params", "k"), an error's text, a retrieved hit's "score".
SHARED_WORDS = {"config", "chunker", "params", "k", "error", "score"}
#: A command-line flag in a message: ``--jobs``, ``--n-trials`` (not ``--`` alone, not ``---``).
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (``tuner.tuning.run.runner``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> set[str]:
    """The package modules ``module`` imports (resolved to dotted names), wherever: at module level,
    under ``if TYPE_CHECKING:`` (a type-only cycle still marks a type that lives in the wrong module)
    and inside functions; an imported name that is a module counts as that module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("tuner"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tuner"))
    return found & set(MODULES)


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_sits_in_a_known_stage():
    assert {_stage(m) for m in MODULES} - {"__init__"} <= set(LAYER_OF)


def test_no_stage_imports_a_stage_above_it():
    offenders = {}
    for module, path in MODULES.items():
        stage = _stage(module)
        if stage == "__init__":
            continue
        above = {target for target in _imported(module, path)
                 if _stage(target) != "__init__" and LAYER_OF[_stage(target)] > LAYER_OF[stage]}
        if above:
            offenders[module] = sorted(above)
    assert not offenders


def _tuning_layer(module: str) -> str | None:
    """The subpackage of ``tuning/`` a module sits in (None: outside it, or ``tuning/__init__``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "tuning" else None


def test_every_tuning_module_sits_in_a_known_layer():
    assert {layer for m in MODULES if (layer := _tuning_layer(m)) is not None} <= set(TUNING_LAYER_OF)


def test_no_tuning_layer_imports_one_above_it():
    offenders = {}
    for module, path in MODULES.items():
        layer = _tuning_layer(module)
        if layer is None:
            continue
        above = {target for target in _imported(module, path)
                 if (other := _tuning_layer(target)) is not None and TUNING_LAYER_OF[other] > TUNING_LAYER_OF[layer]}
        if above:
            offenders[module] = sorted(above)
    assert not offenders


def test_no_module_outgrows_its_limit():
    too_long = {}
    for module, path in MODULES.items():
        limit = MAX_TUNING_MODULE_LINES if _stage(module) == "tuning" else MAX_MODULE_LINES
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            too_long[module] = f"{lines} lines, more than {limit}"
    assert not too_long


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules():
    # Every import counts, those inside a function too: one there runs later, but the two modules
    # still depend on each other, and a cycle hidden so is a cycle all the same (issue 30, item 5:
    # records imported settings inside a function, and settings imports records).
    graph = {module: _imported(module, path) - {module} for module, path in MODULES.items()
             if path.name != "__init__.py"}
    for module in graph:
        graph[module] = {m for m in graph[module] if MODULES[m].name != "__init__.py"}
    assert _cycles(graph) == []


def test_no_import_cycle_between_stages():
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        graph.setdefault(_stage(module), set()).update(
            _stage(target) for target in _imported(module, path) if _stage(target) != _stage(module))
    graph.pop("__init__", None)
    for targets in graph.values():
        targets.discard("__init__")
    assert _cycles(graph) == []


def _strings(tree: ast.AST) -> set[str]:
    """The string constants of a module that are not docstrings (messages, not documentation)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_only_the_command_line_speaks_in_flags():
    offenders = {}
    for module, path in MODULES.items():
        if _stage(module) == "cli":
            continue
        # A command of another tool ("pip install --no-deps ...") spells its own flags, not ours.
        flags = {flag for text in _strings(ast.parse(path.read_text(encoding="utf-8")))
                 if not text.startswith("pip ") for flag in FLAG.findall(text)}
        if flags:
            offenders[module] = sorted(flags)
    assert not offenders


def test_only_the_records_spell_what_a_study_stores():
    assert {"score", "duplicate_of", "worker", "settings", "target_trials"} <= ATTRIBUTE_NAMES
    for module, path in MODULES.items():
        if module == "tuner.tuning.core.records":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        commands = {node.args[0].value for node in ast.walk(tree)  # sub-command names ("worker")
                    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_parser"
                    and node.args and isinstance(node.args[0], ast.Constant)}
        spelled = (_strings(tree) - commands) & (ATTRIBUTE_NAMES - SHARED_WORDS)
        assert not spelled, (module, spelled)


def test_the_kinds_of_trial_are_named_where_they_are_declared():
    # Issue 30, item 5: a trial's kind was compared as a string ("dense", "semantic") in three places.
    from tuner.tuning.search.cost import KINDS

    offenders = {}
    for module, path in MODULES.items():
        if module == "tuner.tuning.search.cost" or _stage(module) != "tuning":
            continue
        spelled = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            operands = ([node.left, *node.comparators] if isinstance(node, ast.Compare)
                        else [node.slice] if isinstance(node, ast.Subscript) else [])
            spelled |= {o.value for o in operands if isinstance(o, ast.Constant) and o.value in KINDS}
        if spelled:
            offenders[module] = sorted(spelled)
    assert not offenders


def test_above_the_tuning_layer_nobody_reads_optuna_attributes():
    for module, path in MODULES.items():
        if LAYER_OF.get(_stage(module), -1) <= LAYER_OF["tuning"]:
            continue
        attributes = {node.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Attribute)}
        assert not attributes & {"user_attrs", "set_user_attr", "system_attrs"}, module


#: The module that owns every private Optuna member chunkwise relies on (issue 64, item 1).
OPTUNA_SEAM = "tuner.tuning.core.optuna_seam"


def _private_members_reached(tree: ast.AST, private: Container[str] | None,
                             methods: Container[str] | None) -> dict[str, str]:
    """Where a module reaches a member named in ``private``, as ``{"line 12: x._name": "_name"}``:
    ``x._name``, ``getattr(x, "_name")`` (and ``hasattr``, ``setattr``, ``delattr``), and a method of a
    class named in ``methods`` (overriding one of Optuna's); None: any ``_name`` that is not a dunder.
    ``self._name`` is a module's own member, not Optuna's, when the module defines ``_name`` itself (a
    method, ``self._name = ...``), as ``tuner.api`` does."""
    def wanted(name: str, names: Container[str] | None = private) -> bool:
        return name in names if names is not None else name.startswith("_") and not name.startswith("__")

    nodes = list(ast.walk(tree))
    defined = [node for node in nodes if isinstance(node, ast.ClassDef) for node in node.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    own = {node.name for node in defined} | {
        node.attr for node in nodes if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name) and node.value.id == "self"}
    found = {f"line {node.lineno}: def {node.name}": node.name for node in defined if wanted(node.name, methods)}
    for node in nodes:
        if isinstance(node, ast.Attribute) and wanted(node.attr) and not (
                isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in own):
            found[f"line {node.lineno}: {ast.unparse(node)}"] = node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and wanted(node.args[1].value)):
            found[f"line {node.lineno}: {ast.unparse(node)}"] = node.args[1].value
    return found


def test_only_the_optuna_seam_reaches_inside_optuna():
    # Issue 64, item 1: 22 private Optuna members (trial._trial_id, study._storage, study._get_trials, ...)
    # and a getattr(storage, "_backend") were reached from five modules, where an Optuna upgrade renaming
    # one would break them. tuning/core/optuna_seam.py owns them all, declared in PRIVATE_MEMBERS and
    # each checked against the installed Optuna by tests/tuning/test_optuna_seam.py.
    from tuner.tuning.core import optuna_seam

    private = optuna_seam.PRIVATE_MEMBERS
    assert len(set(private)) == len(private) and all(name.startswith("_") for name in private)
    reached = {module: sorted(found) for module, path in MODULES.items() if module != OPTUNA_SEAM
               and (found := _private_members_reached(ast.parse(path.read_text(encoding="utf-8")), set(private),
                                                   set(optuna_seam.PRIVATE_METHODS)))}
    count = sum(len(found) for found in reached.values())
    assert count == 0, f"{count} private Optuna member(s) reached outside {OPTUNA_SEAM}: {reached}"
    # The seam declares every private member it reaches, and reaches every one it declares.
    seam = ast.parse(MODULES[OPTUNA_SEAM].read_text(encoding="utf-8"))
    used = set(_private_members_reached(seam, None, None).values())
    assert used == set(private), (f"reached but not declared: {sorted(used - set(private))}; "
                                  f"declared but not reached: {sorted(set(private) - used)}")


def test_errors_are_declared_in_one_module_and_raised_as_chunkwise_errors():
    # Issue 52, item 4: 18 error classes lived beside their code and 33 raises were bare
    # ValueError, RuntimeError or TypeError; every error is now a ChunkwiseError of errors.py (the
    # ones callers may catch as ValueError or RuntimeError subclass those too).
    declared_elsewhere, bare = {}, {}
    for module, path in MODULES.items():
        if module == "tuner.errors":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)
                   and any(isinstance(base, ast.Name) and base.id.endswith("Error") and base.id != "MarkedYAMLError"
                           for base in node.bases)]
        if classes:
            declared_elsewhere[module] = classes
        raised = sorted({node.exc.func.id for node in ast.walk(tree) if isinstance(node, ast.Raise)
                         and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
                         and node.exc.func.id in ("ValueError", "RuntimeError", "TypeError")})
        if raised:
            bare[module] = raised
    assert not declared_elsewhere
    assert not bare


def test_every_exception_class_is_declared_in_the_errors_module():
    # Issue 64, item 2: 11 exception classes lived outside errors.py, let through by the check above,
    # which reads only names ending in "Error" (UnfitAnswer, retried, beside UnfitAnswerError, raised).
    # Any class that crosses a module is declared in errors.py; a signal that never leaves its module
    # may stay there, private and named as a signal, not an error (``_StopRequested``).
    import importlib
    import inspect
    import pkgutil

    import tuner

    elsewhere, skipped = {}, []
    for info in pkgutil.walk_packages(tuner.__path__, "tuner."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the command line when imported: read below
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed here (its module is still read by the AST check)
            skipped.append(info.name)
            continue
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name
                    and info.name != "tuner.errors" and (not name.startswith("_") or name.endswith("Error"))):
                elsewhere[f"{info.name}.{name}"] = [base.__name__ for base in obj.__bases__]
    # The modules not imported (``__main__``, a missing extra): their classes by the AST.
    for module in ["tuner.__main__", "tuner.cli.__main__", *skipped]:
        for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(
                    re.search(r"Error|Exception|Interrupt|Reply|Stop", ast.unparse(base)) for base in node.bases
            ) and (not node.name.startswith("_") or node.name.endswith("Error")):
                elsewhere[f"{module}.{node.name}"] = [ast.unparse(base) for base in node.bases]
    assert not elsewhere, f"{len(elsewhere)} exception class(es) outside tuner/errors.py: {elsewhere}"


def test_every_invalid_value_is_worded_by_the_schema():
    # Issue 64, item 2: schema.invalid() said "NAME=VALUE is invalid; allowed: ..." in 12 places, while
    # 65 raises of InvalidParameterError(f"...") worded it their own way ("; available:", "is outside
    # 1..N", "must be a mapping"). Every one now goes through schema.invalid() (or check_keys).
    offenders = {}
    for module, path in MODULES.items():
        if module == "tuner.schema":
            continue
        calls = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "InvalidParameterError"]
        if calls:
            offenders[module] = calls
    count = sum(map(len, offenders.values()))
    assert not offenders, f"{count} InvalidParameterError(...) worded outside tuner.schema.invalid(): {offenders}"


def test_outside_tuning_imports_go_through_its_public_names():
    # Issue 52, item 1: the package and its layers export what the rest of chunkwise uses; a module
    # outside tuning/ imports those names, never a module inside a layer (the defaults, a declared
    # vocabulary, aside).
    offenders = {}
    for module, path in MODULES.items():
        if _stage(module) == "tuning":
            continue
        inside = {target for target in _imported(module, path)
                  if _tuning_layer(target) is not None and target.count(".") > 2
                  and not target.endswith(".defaults")}
        if inside:
            offenders[module] = sorted(inside)
    assert not offenders
