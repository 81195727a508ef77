"""Every code snippet in README.md and docs/*.md runs against MinIO, so docs cannot rot.

Conventions for writing docs (see docs/cli.md for examples):

* Every fenced ```python block is executed, on its own, in a fresh namespace that already
  holds ``client`` (an ``objsdk.Client`` on the test MinIO), ``bucket`` (the name of a
  fresh, empty bucket, removed afterwards), ``endpoint``, ``access_key`` and
  ``secret_key``; anything else a snippet uses it defines, as a reader copying it must
  (fsspec's ``storage_options`` included). The environment has ``AWS_ENDPOINT_URL``,
  ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` set for that MinIO
  (``Client.from_env()``, the CLI and ``objsdk://`` URLs just work), ``HOME`` points at
  an empty directory (no ``~/.aws``), and the working directory is an empty temporary
  directory (relative paths land there). Write snippets that use these names instead of
  literal endpoints, keys or bucket names, and that create the local files they read.
* A fenced ```sh or ```bash block runs (with ``bash -euo pipefail``, same environment and
  working directory, ``$BUCKET`` set to the fresh bucket, ``objsdk`` on the PATH) only
  when the line just before it is ``<!-- run-snippet -->``; other shell blocks
  (installation, ``make`` targets) are illustrations.
* A block whose preceding line is ``<!-- skip-snippet: REASON -->`` is skipped, and the
  reason is reported. Use it sparingly; the reason is mandatory.
* Other languages (``ini``, ``text``, ``console``...) are never run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from user_env import without_aws

from objsdk import Client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
SKIP = re.compile(r"^<!--\s*skip-snippet:\s*(?P<reason>\S.*?)\s*-->$")
RUN = re.compile(r"^<!--\s*run-snippet\s*-->$")
SHELLS = {"sh", "bash", "shell"}


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str  # the line before the fence

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def extract(path: Path) -> list[Snippet]:
    """The fenced code blocks of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Snippet] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("info").strip().split(" ")[0].lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(m.group("indent")) :])
            i += 1
        i += 1  # the closing fence
        marker = lines[start - 1].strip() if start > 0 else ""
        out.append(Snippet(path, start + 1, lang, "\n".join(body) + "\n", marker))
    return out


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [f for f in files if f.exists()]


def snippets() -> list[Any]:
    params = []
    for path in doc_files():
        for s in extract(path):
            runs = s.lang == "python" or (s.lang in SHELLS and RUN.match(s.marker))
            if not runs:
                continue
            marks = []
            skip = SKIP.match(s.marker)
            if skip:
                marks.append(pytest.mark.skip(reason=f"{s.id}: {skip.group('reason')}"))
            params.append(pytest.param(s, id=s.id, marks=marks))
    return params


# -- the harness's own rules, checked without a server -------------------------------------


def test_extract_finds_fences_languages_and_markers(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "text\n```python\nx = 1\n```\n<!-- skip-snippet: needs a GPU -->\n"
        "```python\ny = 2\n```\n````sh\necho '```'\n````\n"
    )
    found = extract(doc)
    assert [(s.lang, s.code, s.line) for s in found] == [
        ("python", "x = 1\n", 2),
        ("python", "y = 2\n", 6),
        ("sh", "echo '```'\n", 9),
    ]
    skip = SKIP.match(found[1].marker)
    assert skip is not None
    assert skip.group("reason") == "needs a GPU"


def test_a_skip_marker_without_a_reason_does_not_skip() -> None:
    assert SKIP.match("<!-- skip-snippet: -->") is None
    assert SKIP.match("<!-- skip-snippet -->") is None


def test_docs_have_snippets() -> None:
    assert len(snippets()) >= 5


# -- citations of docs/perf.md's sections ----------------------------------------------------

PERF_MD = ROOT / "docs" / "perf.md"
# A section cited by name: the path, a comma, then one or more quoted headings; or a link
# to its anchor (the file name, "#", the anchor).
CITED_BY_NAME = re.compile(r'docs/perf\.md,\s*((?:"[^"]+"(?:,\s*)?)+)')
CITED_BY_ANCHOR = re.compile(r"perf\.md#([\w-]+)")
QUOTED = re.compile(r'"([^"]+)"')
# A line break inside a citation, with the indentation and "#" of a comment that goes on.
LINE_BREAK = re.compile(r"\s*\n\s*(?:#\s*)?")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<text>.+?)(?:[ \t]+#+)?[ \t]*$")


def headings(markdown: str) -> list[str]:
    """The text of a Markdown file's ATX headings, outside fenced code blocks."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines():
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        m = FENCE.match(line)
        if m:
            fence = m.group("fence")
            continue
        h = HEADING.match(line)
        if h:
            out.append(h.group("text"))
    return out


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def perf_md_citations(text: str) -> tuple[list[str], list[str]]:
    """The headings of docs/perf.md that a text cites by name, and the anchors it links."""
    flat = LINE_BREAK.sub(" ", text)
    names = [q for m in CITED_BY_NAME.finditer(flat) for q in QUOTED.findall(m.group(1))]
    return names, CITED_BY_ANCHOR.findall(text)


def citing_files() -> list[Path]:
    code = [p for d in ("objsdk", "perf", "tests") for p in sorted((ROOT / d).rglob("*.py"))]
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *code]


def test_perf_md_citations_are_read_from_comments_docstrings_and_links() -> None:
    doc = "docs/perf" + ".md"  # spelled apart so this file cites nothing itself
    text = (
        f'# costs more (docs/perf.md is not cited here); it is ({doc}, "First\n'
        f'    # heading", "Second: two")\n'
        f'"""Docstring ({doc}, "A heading\n    over lines")."""\n'
        f"See [perf.md]({doc[5:]}#an-anchor) and ({doc}) with no section.\n"
    )
    names, anchors = perf_md_citations(text)
    assert names == ["First heading", "Second: two", "A heading over lines"]
    assert anchors == ["an-anchor"]


def test_perf_md_headings_are_read_outside_code_blocks_with_their_anchors() -> None:
    markdown = "# Title\n\n## Reads: ObjectFile, lines, tar, cuts\n```\n## output\n```\n### A #\n"
    assert headings(markdown) == ["Title", "Reads: ObjectFile, lines, tar, cuts", "A"]
    assert anchor("Reads: ObjectFile, lines, tar, cuts") == "reads-objectfile-lines-tar-cuts"
    assert anchor("`cat` of many files") == "cat-of-many-files"


def test_every_citation_of_a_perf_md_section_names_one_of_its_headings() -> None:
    """Code and docs that cite a section of docs/perf.md by its heading or its anchor
    point at a heading that exists, so a reader following the citation finds it."""
    titles = headings(PERF_MD.read_text(encoding="utf-8"))
    anchors = {anchor(t) for t in titles}
    found: list[str] = []
    broken: list[str] = []
    for path in citing_files():
        names, links = perf_md_citations(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT).as_posix()
        found += names + links
        broken += [f'{where}: "{n}"' for n in names if n not in titles]
        broken += [f"{where}: #{a}" for a in links if a not in anchors]
    assert len(found) >= 10, f"too few citations found, the reader is broken: {found}"
    assert not broken, "citations of docs/perf.md sections it does not have:\n" + "\n".join(broken)


# -- running them ----------------------------------------------------------------------------


@pytest.fixture
def snippet_env(
    local_minio: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = without_aws()
    # The built MinIO stays where it is when HOME moves (snippets may start LocalMinio).
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = os.environ.get("OBJSDK_CACHE_DIR") or str(
        Path(xdg) / "objsdk" if xdg else Path.home() / ".cache" / "objsdk"
    )
    env.update(
        OBJSDK_CACHE_DIR=cache,
        HOME=str(home),
        AWS_ENDPOINT_URL=local_minio.endpoint,
        AWS_ACCESS_KEY_ID=local_minio.access_key,
        AWS_SECRET_ACCESS_KEY=local_minio.secret_key,
        BUCKET=bucket,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    names = ("HOME", "OBJSDK_CACHE_DIR", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID")
    for name in (*names, "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.chdir(work)
    return env


@pytest.mark.parametrize("snippet", snippets())
def test_snippet_runs(
    snippet: Snippet, snippet_env: dict[str, str], local_minio: Any, client: Client, bucket: str
) -> None:
    if snippet.lang in SHELLS:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", snippet.code],
            env=snippet_env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, (
            f"{snippet.id} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout.decode()}\nstderr:\n{proc.stderr.decode()}"
        )
        return
    namespace: dict[str, Any] = {
        "__name__": "__snippet__",
        "client": client,
        "bucket": bucket,
        "endpoint": local_minio.endpoint,
        "access_key": local_minio.access_key,
        "secret_key": local_minio.secret_key,
    }
    code = compile(snippet.code, snippet.id, "exec")
    exec(code, namespace)
