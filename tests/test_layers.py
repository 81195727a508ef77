"""The package's structure as a specification: layers, no import cycles, no optional
dependency at ``import objsdk``, no module past ~600 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "objsdk"


def import_cycles(package: str, **build_graph: Any) -> list[tuple[str, ...]]:
    """Each import chain by which a module of ``package`` comes back to itself at run
    time. An import under ``if TYPE_CHECKING:`` runs only in type checkers, so a cycle
    through one is no cycle (``_transport/http.py`` and ``sendfile.py`` name each other's
    types that way)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, **build_graph)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if not imported.startswith(package):
                continue
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.append((module, *chain))
    return cycles


def test_no_module_of_objsdk_imports_itself_back_through_others():
    assert import_cycles("objsdk") == []


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)
    return name


@pytest.mark.parametrize(
    ("name", "guard"),
    [
        ("typed_cycle", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:"),
        ("typing_typed_cycle", "import typing\nif typing.TYPE_CHECKING:"),
    ],
)
def test_a_cycle_only_type_checkers_follow_is_allowed(tmp_path, monkeypatch, name, guard):
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(
        tmp_path,
        name,
        {
            "http": f"{guard}\n    from .sendfile import put_file\n",
            "sendfile": "from . import http\ndef put_file(): pass\n",
        },
    )
    assert import_cycles(name, cache_dir=None) == []


def test_a_cycle_followed_at_run_time_is_refused(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(
        tmp_path,
        "runtime_cycle",
        {
            "http": "from .sendfile import put_file\n",
            "sendfile": "from . import http\ndef put_file(): pass\n",
        },
    )
    assert import_cycles(name, cache_dir=None) == [
        (f"{name}.http", f"{name}.sendfile", f"{name}.http"),
        (f"{name}.sendfile", f"{name}.http", f"{name}.sendfile"),
    ]


def test_import_objsdk_loads_no_developer_tool_and_no_optional_dependency():
    code = (
        "import sys, objsdk; "
        "bad = [m for m in sys.modules if m.startswith('objsdk.testing') or m.split('.')[0] in "
        "('numpy', 'fsspec', 'tqdm', 'matplotlib', 'torch', 'pandas', 'pyarrow', 'boto3')]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_module_is_longer_than_600_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}
