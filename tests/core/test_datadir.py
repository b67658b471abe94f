"""The data directory's layout is written in one place (``rota.core.datadir``): no other module
of rota names one of its files or directories. Sources are parsed, so a name on a path no test
runs counts too; docstrings may name them."""

from __future__ import annotations

import ast
from pathlib import Path

import rota
from rota.core import datadir

ROOT = Path(rota.__file__).parent
NAMES = {datadir.STORE_FILE, datadir.LOCK_FILE, datadir.LOG_FILE, datadir.TLS_DIR,
         datadir.UPLOADS_DIR, datadir.JOBS_DIR, datadir.SLURM_INSTANCE, datadir.SLURM_REPORTS,
         *datadir.JOB_OWN_DIRS, *datadir.STORE_FILES}
FILES = {datadir.LOCK_FILE, datadir.LOG_FILE, datadir.SLURM_INSTANCE, datadir.SLURM_REPORTS,
         *datadir.STORE_FILES}  # names no other string of rota has


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _path_names(path: Path) -> list[str]:
    """Where ``path`` names a layout entry: one of NAMES used as a path part (``/ "jobs"``),
    or one of FILES anywhere but in a docstring."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if isinstance(side, ast.Constant) and side.value in NAMES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: / {side.value!r}")
        elif (isinstance(node, ast.Constant) and id(node) not in docs
              and node.value in FILES):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_only_the_layout_module_names_the_data_directorys_entries():
    found = [hit for path in sorted(ROOT.rglob("*.py")) if path.name != "datadir.py"
             for hit in _path_names(path)]
    assert not found, ("these name a file or directory of the data directory; take its name "
                       "or path from rota.core.datadir instead:\n" + "\n".join(found))


def test_a_job_id_names_one_directory_under_jobs():
    home = datadir.job_home(Path("/d"), "../x")
    assert home.parent == Path("/d/jobs") and home.name == "..%2Fx"
    assert datadir.upload_archive(Path("/d"), "ab") == Path("/d/uploads/ab.tar.gz")


def test_a_job_id_is_quoted_as_urllib_quotes_a_path_part():
    from urllib.parse import quote
    for name in ("12", "a/b", "..", "x y%z", "é-ü~_.", "日本", "a:b;c?d#e", "\x00\n"):
        assert datadir.quoted(name) == quote(name, safe=""), name
