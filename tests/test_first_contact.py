"""What a new user meets first, checked the way they meet it: objsdk installed as users
install it (one regular install of this checkout, tests/installed_venv.py), its console
script and its Python run in subprocesses with a user's environment, and the docs they
read on the way."""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from installed_venv import Installed, installed

from objsdk.testing import gobuild

__all__ = ["installed"]  # fixtures, used by name

ROOT = Path(__file__).resolve().parent.parent


def test_the_install_is_a_regular_one_of_this_checkout(
    installed: Installed, tmp_path: Path
) -> None:
    done = installed.run(
        [installed.python, "-c", "import objsdk, sys; print(objsdk.__file__)"], cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.strip())
    assert installed.root in where.parents  # site-packages, not the checkout
    assert ROOT not in where.parents
    assert installed.script("objsdk").exists()


def test_import_objsdk_prints_nothing(installed: Installed, tmp_path: Path) -> None:
    done = installed.run([installed.python, "-c", "import objsdk, objsdk.testing"], cwd=tmp_path)

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# -- installing: objsdk is not on the package index -------------------------------------------

GETTING_STARTED = ROOT / "docs" / "getting-started.md"
# Where a user reads an install command: the docs, the package's messages, the scripts.
READ_BY_USERS = ("README.md", "docs/*.md", "objsdk/**/*.py", "examples/*.py", "perf/*.py")
_PIP_INSTALL = re.compile(r"pip install\b[^\n`#]*")  # up to a comment


def index_installs(text: str) -> list[str]:
    """The ``pip install`` commands in ``text`` that name objsdk as a package of the
    index (``objsdk``, ``'objsdk[fsspec]'``), which would fetch whatever the index holds
    under that name; a path (``./objsdk``, ``'.[fsspec]'``) or a direct reference
    (``'objsdk[fsspec] @ git+...'``) is not one."""
    found = []
    for m in _PIP_INSTALL.finditer(text):
        words = m.group(0).split()[2:]
        for i, word in enumerate(words):
            name = word.strip("'\"(),")
            direct = words[i + 1 : i + 2] == ["@"] or "@" in word
            if re.fullmatch(r"objsdk(\[[\w,-]*\])?", name) and not direct:
                found.append(m.group(0))
    return found


def test_what_counts_as_an_install_from_the_index() -> None:
    assert index_installs("pip install objsdk") == ["pip install objsdk"]
    assert index_installs("run `pip install 'objsdk[numpy]'` first") == [
        "pip install 'objsdk[numpy]'"
    ]
    assert index_installs("ImportError(\"x: pip install 'objsdk[perf]'\")") != []
    for fine in (
        "pip install ./objsdk",
        "pip install './objsdk[fsspec]'",
        "pip install -e '.[dev]'",
        "pip install 'objsdk[fsspec] @ git+https://example.com/objsdk.git'",
    ):
        assert index_installs(fine) == [], fine


def test_no_doc_message_or_script_installs_objsdk_from_the_package_index() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {command}"
        for pattern in READ_BY_USERS
        for path in ROOT.glob(pattern)
        for command in index_installs(path.read_text(encoding="utf-8"))
    }

    assert sorted(found) == []


def test_getting_started_gives_the_install_command_of_every_extra(
    installed: Installed, tmp_path: Path
) -> None:
    text = GETTING_STARTED.read_text(encoding="utf-8")
    code = "import importlib.metadata as m; print(*m.metadata('objsdk').get_all('Provides-Extra'))"
    extras = installed.run([installed.python, "-c", code], cwd=tmp_path).stdout.split()

    assert "pip install ./objsdk" in text
    missing = [e for e in extras if e != "dev" and f"pip install './objsdk[{e}]'" not in text]
    assert missing == []
    assert "pip install -e '.[fsspec]'" in text  # from inside the clone


@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("objsdk.shm", "from objsdk.shm import load_shared\nload_shared(CLIENT, 'b', 'a.npy')"),
        ("decoding .npy", "from objsdk.datasets.decode import npy\nnpy(b'')"),
    ],
    ids=["shm", "npy-decoder"],
)
def test_a_missing_extra_is_named_with_the_install_command_of_getting_started(
    installed: Installed, tmp_path: Path, what: str, code: str
) -> None:
    client = "from objsdk import Client\nCLIENT = Client('http://127.0.0.1:9', 'AKIDEXAMPLE', 's')"
    done = installed.run([installed.python, "-c", f"{client}\n{code}"], cwd=tmp_path)

    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: {what} needs numpy: ")
    command = re.search(r"pip install '[^']*'", last)
    assert command is not None, last
    assert command.group(0) == "pip install './objsdk[numpy]'"
    assert command.group(0) in GETTING_STARTED.read_text(encoding="utf-8")
    assert "docs/getting-started.md" in last


# -- ShardDataset's defaults are stated ---------------------------------------------------------

_SIGNATURE = """
import inspect, json
from objsdk.datasets import ShardDataset
params = inspect.signature(ShardDataset).parameters.values()
print(json.dumps({
    "doc": inspect.getdoc(ShardDataset),
    "defaults": {p.name: repr(p.default) for p in params if p.default is not p.empty},
}))
"""


def stated_defaults(text: str, quote: str, names: Iterable[str]) -> dict[str, str]:
    """``{name: repr(default)}`` of each table row of ``text`` that starts with one of
    ``names`` in code quotes (``quote``: two backticks in a docstring, one in Markdown)
    followed by its default, which is evaluated as a Python expression (``4 << 20``,
    ``"raise"``, ``None``)."""
    q = re.escape(quote)
    row = re.compile(rf"^\|?\s*{q}(\w+){q}\s*\|?\s*{q}([^`]+){q}", re.M)
    return {
        m.group(1): repr(eval(m.group(2), {"__builtins__": {}}))
        for m in row.finditer(text)
        if m.group(1) in names
    }


@pytest.fixture
def shard_dataset_signature(installed: Installed, tmp_path: Path) -> dict[str, Any]:
    done = installed.run([installed.python, "-c", _SIGNATURE], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_shard_dataset_docstring_states_every_default(
    shard_dataset_signature: dict[str, Any],
) -> None:
    defaults = shard_dataset_signature["defaults"]

    stated = stated_defaults(shard_dataset_signature["doc"], "``", defaults)

    assert stated == defaults


def test_datasets_doc_states_every_default_of_shard_dataset(
    shard_dataset_signature: dict[str, Any],
) -> None:
    defaults = shard_dataset_signature["defaults"]

    text = (ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")

    assert stated_defaults(text, "`", defaults) == defaults


# -- the one-time build of MinIO: how long, how far, and how to skip it --------------------------

# Behaves like a cold `go install -v`: a download line, then one line per package compiled,
# slowly, then the binary in $GOBIN.
FAKE_GO = """\
#!{python}
import os, pathlib, sys, time
print("go: downloading github.com/minio/minio v0.0.0", file=sys.stderr, flush=True)
for i in range(12):
    time.sleep(0.1)
    print(f"github.com/minio/minio/internal/pkg{{i}}", file=sys.stderr, flush=True)
exe = pathlib.Path(os.environ["GOBIN"]) / "minio"
exe.write_text("#!/bin/sh\\n")
exe.chmod(0o755)
"""

_BUILD = """
from objsdk.testing import gobuild
gobuild.PROGRESS_EVERY = 0.25
print(gobuild.minio_binary())
"""


def test_the_one_time_build_of_minio_says_how_long_and_how_far_it_is(
    installed: Installed, tmp_path: Path
) -> None:
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO.format(python=sys.executable))
    (fake / "go").chmod(0o755)
    env = installed.env(tmp_path, {"OBJSDK_CACHE_DIR": str(tmp_path / "cache")})
    env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"

    done = installed.run([installed.python, "-c", _BUILD], cwd=tmp_path, env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("/minio")
    notice, *progress = done.stderr.splitlines()
    assert notice.startswith("objsdk: building minio ")
    assert "one-time: about 10 minutes on 2 cores" in notice
    assert len(progress) >= 2, done.stderr
    counts = []
    for line in progress:  # the only other lines: how far it is
        m = re.fullmatch(
            r"objsdk: still building minio: \d+ s, (\d+) packages compiled \(about 1,300 in all\)",
            line,
        )
        assert m is not None, line
        counts.append(int(m.group(1)))
    assert counts == sorted(counts)
    assert 0 < counts[-1] <= 12


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a Markdown heading line) up to the next heading of
    its level or above."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start:], re.M)]
    return text[start : start + ends[0]] if ends else text[start:]


@pytest.mark.parametrize(
    ("doc", "heading"),
    [("README.md", "### In your own tests"), ("docs/getting-started.md", "## Install")],
)
def test_the_docs_say_how_long_the_build_takes_and_how_to_skip_it(doc: str, heading: str) -> None:
    text = " ".join(section(ROOT / doc, heading).split())

    assert "about 10 minutes on 2 cores" in text
    for name in ("binary=", "OBJSDK_MINIO_BINARY", "OBJSDK_TOXIPROXY_BINARY", "OBJSDK_CACHE_DIR"):
        assert name in text, name


_OWN_MINIO = """
import sys
from objsdk.testing import LocalMinio
with LocalMinio(**({"binary": sys.argv[1]} if len(sys.argv) > 1 else {})) as minio:
    with minio.client() as client:
        client.create_bucket("mine")
        print(*(b.name for b in client.list_buckets()))
"""


@pytest.mark.parametrize("how", ["OBJSDK_MINIO_BINARY", "binary="])
def test_a_minio_of_ones_own_skips_the_build(
    installed: Installed, tmp_path: Path, how: str
) -> None:
    own = gobuild.minio_binary()  # a MinIO the user has (the suite's own)
    cache = tmp_path / "cache"
    env = installed.env(tmp_path, {"OBJSDK_CACHE_DIR": str(cache)})
    args: list[str | Path] = [installed.python, "-c", _OWN_MINIO]
    if how == "binary=":
        args.append(own)
    else:
        env["OBJSDK_MINIO_BINARY"] = str(own)

    done = installed.run(args, cwd=tmp_path, env=env)

    assert (done.returncode, done.stdout, done.stderr) == (0, "mine\n", "")
    assert not (cache / "bin").exists()  # nothing built


# -- the README's quickstart is for users -------------------------------------------------------


def test_the_readme_quickstart_says_what_the_commands_do_and_how_long_not_ci_figures() -> None:
    quickstart = " ".join(section(ROOT / "README.md", "## Quickstart").split())
    development = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")

    assert "make demo #" in quickstart
    assert "make test #" in quickstart
    assert "about 10 minutes on 2 cores" in quickstart  # the one-time build
    assert re.findall(r"\d[\d,]* tests", quickstart) == []
    for internal in (".ci/run", "VM", "EPYC"):
        assert internal not in quickstart
    assert "docs/development.md" in quickstart
    assert re.findall(r"\d[\d,]* tests", development) != []  # where the CI figures are


# -- fsspec storage options: a mistake says what was meant ------------------------------------

_STORAGE_OPTIONS = """
import sys, fsspec
try:
    fsspec.filesystem("objsdk", endpoint_url="http://127.0.0.1:9", **eval(sys.argv[1]))
except Exception as e:
    print(f"{type(e).__name__}: {e}")
"""


def fsspec_error(installed: Installed, tmp_path: Path, options: str) -> str:
    """What ``fsspec.filesystem("objsdk", **options)`` raises in a user's process (no
    AWS_* variables, no ~/.aws)."""
    done = installed.run([installed.python, "-c", _STORAGE_OPTIONS, options], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("options", "meant"),
    [
        ("{'endpoint': 'http://127.0.0.1:9'}", "endpoint (did you mean endpoint_url?)"),
        ("{'access_key': 'AKIDEXAMPLE'}", "access_key (did you mean key?)"),
        ("{'region_name': 'eu-west-1'}", "region_name (did you mean region?)"),
        ("{'readahaed': 4}", "readahaed (did you mean readahead?)"),
        ("{'colour': 'blue'}", "colour"),
    ],
)
def test_an_unknown_storage_option_suggests_the_one_meant(
    installed: Installed, tmp_path: Path, options: str, meant: str
) -> None:
    error = fsspec_error(installed, tmp_path, options)

    assert error == f"TypeError: ObjsdkFileSystem got unknown storage options: {meant}"


def test_a_secret_without_its_key_says_where_the_key_would_come_from(
    installed: Installed, tmp_path: Path
) -> None:
    error = fsspec_error(installed, tmp_path, "{'secret': 'not-shown-anywhere'}")

    assert error.startswith("ConfigError: ")
    assert "secret= given without key=" in error
    for remedy in ("key=", "AWS_ACCESS_KEY_ID", "profile="):
        assert remedy in error
    assert "not-shown-anywhere" not in error


def test_the_suggestions_are_drawn_from_the_filesystems_own_arguments() -> None:
    from objsdk.filesystem import ObjsdkFileSystem, options

    own = inspect.signature(ObjsdkFileSystem.__init__).parameters

    assert sorted(options.OWN_OPTIONS) == sorted(set(own) - {"self", "kwargs"})


# -- the docs say what installing brings ----------------------------------------------------------

_REQUIRES = """
import importlib.metadata, re
for req in importlib.metadata.requires("objsdk"):
    if "extra ==" not in req:
        print(re.match(r"[A-Za-z0-9_.-]+", req).group(0))
"""


def test_getting_started_names_every_runtime_dependency(
    installed: Installed, tmp_path: Path
) -> None:
    done = installed.run([installed.python, "-c", _REQUIRES], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    required = sorted(done.stdout.split())
    install = section(GETTING_STARTED, "## Install")
    sentence = " ".join(install[: install.index("\n\n", 1)].split())  # its first paragraph

    assert "runtime dependencies" in sentence
    named = sorted(set(re.findall(r"`([A-Za-z0-9_.-]+)`", sentence)))
    assert named == required
