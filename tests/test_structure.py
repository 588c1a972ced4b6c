"""The package's layering: what may import the tuning layer, and who reads what a study stores."""

from __future__ import annotations

import ast
from pathlib import Path

from tuner.tuning import records

PACKAGE = Path(__file__).resolve().parents[1] / "tuner"
#: Modules above the tuning layer: they use it (and read studies through tuning.records).
ABOVE_TUNING = {"cli.py", "export.py", "report.py", "__main__.py"}
#: What a study stores, by name: only tuning/ may spell these out. (A few words are also keys of the
#: configuration schema shared with exports, "config", "chunker", "params", "k", "error": not checked.)
ATTRIBUTE_NAMES = {value for name, value in vars(records).items()
                   if name.endswith("_ATTR") and isinstance(value, str)} - {"config", "chunker", "params", "k", "error"}


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_below_the_tuning_layer_imports_it():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "tuning" or relative.name in ABOVE_TUNING or relative == Path("__init__.py"):
            continue
        bad = {name for name in _imports(ast.parse(path.read_text(encoding="utf-8")))
               if name.lstrip(".").startswith("tuning") or name.startswith("tuner.tuning")}
        if bad:
            offenders[str(relative)] = bad
    assert not offenders


def test_the_tuning_layer_does_not_import_what_sits_above_it():
    for path in (PACKAGE / "tuning").glob("*.py"):
        names = _imports(ast.parse(path.read_text(encoding="utf-8")))
        assert not {n for n in names if n.lstrip(".") in ("cli", "export", "report")}, path.name


def test_report_export_and_cli_read_studies_only_through_records():
    assert {"score", "duplicate_of", "worker", "settings", "target_trials"} <= ATTRIBUTE_NAMES
    for name in ABOVE_TUNING - {"__main__.py"}:
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        commands = {node.args[0].value for node in ast.walk(tree)  # sub-command names ("worker")
                    if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_parser"}
        literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)} - commands
        assert not literals & ATTRIBUTE_NAMES, (name, literals & ATTRIBUTE_NAMES)
        attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not attributes & {"user_attrs", "set_user_attr", "system_attrs"}, name
