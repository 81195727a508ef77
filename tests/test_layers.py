"""The package's structure as a specification: layers, no import cycles, no optional
dependency at ``import objsdk``, no module past ~600 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parent.parent / "objsdk"


def test_no_module_of_objsdk_imports_itself_back_through_others():
    # A cycle only type checkers follow is no cycle at run time.
    graph = grimp.build_graph("objsdk", exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if not imported.startswith("objsdk"):
                continue
            chain = graph.find_shortest_chain(importer=imported, imported=module)
            if chain is not None:
                cycles.append((module, *chain))
    assert cycles == []


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
