"""Every ```python block of README.md and docs/*.md runs, against `lmclient.testing.FakeLLM`
served on 127.0.0.1, so that a doc's example breaks a test the day it stops being true.

The comment on the line before a block (blank lines between allowed) says how it runs:

- none: as written, in a fresh namespace, its imports its own (the working directory a fresh
  temporary one);
- ``<!-- prelude: NAME -->``: after the prelude ``NAME`` of `PRELUDES` (a fragment that takes
  a client, a URL, a struct as given: the prelude is what the surrounding text says they are),
  or ``<!-- prelude: previous -->``: after the page's block before it (``Report``, defined
  once, used again);
- ``<!-- run: pytest -->``: a test file, written out and run by pytest in a fresh interpreter,
  every test passing;
- ``<!-- run: elsewhere tests/...py -->``: a block a test of its own runs (one that needs what
  this suite does not have, a Ray cluster): that file must read the block's page;
- ``<!-- signature: lmclient.Client.generate_many -->``: a signature, not code; its parameter
  names, in order, must be those of the callable named.

A block whose top level awaits runs as in ``python -m asyncio`` or a notebook, with
``aclient`` made inside that loop where the prelude offers one.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import importlib
import inspect
import re
import subprocess
import sys
import tempfile
import wave
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

import lmclient
from lmclient.testing import FakeLLM

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"<!--\s*(prelude|run|signature):\s*(.*?)\s*-->")
OPEN = re.compile(r"```python\b")

# The preludes: what a fragment's surrounding text takes as given. `url` is the fake's.
CLIENT = """
from typing import Literal

import msgspec

import lmclient


class Person(msgspec.Struct):
    name: str
    age: int


client = lmclient.Client(url)
"""
PRELUDES: dict[str, str] = {
    # A page's fragments: `client` on the fake (any model name served), `Person` as in README.
    "client": CLIENT,
    # A whole program naming a server of its own: the literals below are the fake's, and the
    # working directory holds the files it reads (cat.jpg, note.wav).
    "local-server": "",
}
# What "local-server" stands in for in a block's text: the documented address of "your server".
LOCAL_URL = "http://127.0.0.1:8000/v1"
LOCAL_SOCKET = "/run/vllm.sock"


@dataclasses.dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    code: str
    mark: tuple[str, str] | None  # (kind, argument) of the comment before it

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Page:
    blocks: list[Block]
    stray_marks: list[int]  # lines of marks that precede no python block


def parse(page: str, text: str) -> Page:
    """The python blocks of one markdown page, each with the mark before it."""
    lines = text.split("\n")
    blocks: list[Block] = []
    marked: set[int] = set()
    i = 0
    while i < len(lines):
        if not OPEN.match(lines[i]):
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise AssertionError(f"{page}:{i + 1}: a ```python block that never closes")
        before = next((j for j in range(i - 1, -1, -1) if lines[j].strip()), None)
        found = MARK.fullmatch(lines[before].strip()) if before is not None else None
        if found is not None and before is not None:
            marked.add(before)
        mark = (found.group(1), found.group(2)) if found else None
        blocks.append(Block(page, i + 1, "\n".join(lines[i + 1 : end]) + "\n", mark))
        i = end + 1
    stray = [n + 1 for n, line in enumerate(lines) if MARK.search(line) and n not in marked]
    return Page(blocks, stray)


def pages() -> dict[str, Page]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {str(p.relative_to(ROOT)): parse(str(p.relative_to(ROOT)), p.read_text()) for p in paths}


PAGES = pages()
BLOCKS = [block for page in PAGES.values() for block in page.blocks]


# -- running a block ----------------------------------------------------------------------


def execute(code: str, namespace: dict[str, Any], filename: str) -> None:
    """Run ``code`` in ``namespace``; a top level that awaits runs in its own event loop, with
    ``aclient`` (where the namespace has a ``url`` and the code names it) made in that loop."""
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if not compiled.co_flags & inspect.CO_COROUTINE:
        exec(compiled, namespace)  # our own docs
        return

    assert "url" in namespace, f"{filename} awaits: give it a prelude (its aclient)"

    async def main() -> None:
        async with lmclient.AsyncClient(namespace["url"]) as aclient:
            namespace["aclient"] = aclient
            await eval(compiled, namespace)  # our own docs

    asyncio.run(main())


def chain(block: Block) -> list[Block]:
    """The block and, for ``prelude: previous``, those it continues, first first."""
    out = [block]
    while out[0].mark == ("prelude", "previous"):
        blocks = PAGES[block.page].blocks
        at = blocks.index(out[0])
        assert at > 0, f"{out[0].id}: 'prelude: previous' on a page's first block"
        out.insert(0, blocks[at - 1])
    return out


def write_files(where: Path) -> None:
    # A JPEG's first bytes: the MIME type is read from them (the fake looks no further).
    (where / "cat.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00" + b"\xff\xd9")
    with wave.open(str(where / "note.wav"), "wb") as note:
        note.setnchannels(1)
        note.setsampwidth(2)
        note.setframerate(8000)
        note.writeframes(b"\x00\x00" * 800)


@contextmanager
def prepared(name: str, cwd: Path) -> Iterator[tuple[dict[str, Any], Callable[[str], str]]]:
    """The namespace the prelude ``name`` leaves, and how it rewrites a block's text."""
    assert name in PRELUDES, f"unknown prelude {name!r}: one of {[*PRELUDES, 'previous']}"
    fake = FakeLLM()
    with ExitStack() as stack:
        url = stack.enter_context(fake.serve())
        namespace: dict[str, Any] = {"__name__": "__docs__", "url": url}
        rewrite: Callable[[str], str] = str  # as written
        if name == "local-server":
            # A short path: a Unix socket's is at most 107 bytes.
            socket = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "llm.sock"
            stack.enter_context(fake.serve(uds=socket))
            write_files(cwd)
            local = {LOCAL_URL: url, LOCAL_SOCKET: str(socket)}

            def rewrite(code: str) -> str:
                return re.sub("|".join(map(re.escape, local)), lambda m: local[m[0]], code)

        exec(compile(PRELUDES[name], f"<prelude {name}>", "exec"), namespace)
        try:
            yield namespace, rewrite
        finally:
            for value in namespace.values():
                if isinstance(value, lmclient.Client):
                    value.close()


def run_block(block: Block, cwd: Path) -> None:
    """Run ``block`` after its prelude (`check` deals with the other marks)."""
    blocks = chain(block)
    root = blocks[0]
    if root.mark is None:
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        for each in blocks:
            execute(each.code, namespace, each.id)
        return
    kind, name = root.mark
    assert kind == "prelude", f"{root.id}: a block marked {kind!r} runs on its own"
    with prepared(name, cwd) as (namespace, rewrite):
        for each in blocks:
            execute(rewrite(each.code), namespace, each.id)


def run_pytest(block: Block, cwd: Path) -> None:
    (cwd / "test_block.py").write_text(block.code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_block.py"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\d+ passed", done.stdout), done.stdout
    assert not re.search(r"skipped|xfail|deselected", done.stdout), done.stdout


def named(dotted: str) -> Any:
    """The object a dotted name starting at a module names."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise AssertionError(f"{dotted!r} names nothing")


def written_parameters(code: str) -> list[str]:
    """The parameters a signature block writes, in order: names, ``*``, ``**name``."""
    inside = code[code.index("(") + 1 : code.rindex(")")]
    depth, piece, pieces = 0, "", []
    for char in inside:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            pieces.append(piece)
            piece = ""
        else:
            piece += char
    pieces.append(piece)
    names = [re.match(r"\s*(\*\*\w+|\*\w*|\w+)", piece) for piece in pieces if piece.strip()]
    assert all(names), f"not a signature: {code!r}"
    return [name.group(1) for name in names if name]


def real_parameters(target: Any) -> list[str]:
    out: list[str] = []
    for parameter in inspect.signature(target).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        if parameter.kind is parameter.VAR_KEYWORD:
            out.append(f"**{parameter.name}")
        elif parameter.kind is parameter.VAR_POSITIONAL:
            out.append(f"*{parameter.name}")
        else:
            out.append(parameter.name)
    return out


def check_signature(block: Block, dotted: str) -> None:
    written, real = written_parameters(block.code), real_parameters(named(dotted))
    assert written == real, f"{block.id}: {dotted} takes {real}, the doc writes {written}"


def check(block: Block, cwd: Path) -> None:
    """What the block's mark asks of it."""
    kind, argument = block.mark or ("prelude", "")
    if kind == "signature":
        check_signature(block, argument)
    elif kind == "run" and argument == "pytest":
        run_pytest(block, cwd)
    elif kind == "run" and argument.startswith("elsewhere "):
        test = ROOT / argument.removeprefix("elsewhere ")
        assert test.is_file(), f"{block.id}: {test} does not exist"
        assert block.page in test.read_text(), f"{block.id}: {test} does not read {block.page}"
    elif kind == "run":
        raise AssertionError(f"{block.id}: 'run: {argument}', not pytest or elsewhere PATH")
    else:
        tests = re.findall(r"^(?:async )?def (test_\w+)", block.code, re.MULTILINE)
        assert not tests, f"{block.id} defines {tests}: mark it 'run: pytest' so that they run"
        run_block(block, cwd)


# -- the blocks ---------------------------------------------------------------------------


# Blocks known to fail until another part of issue 37 lands, by a line of theirs; strict, so
# that the day one passes, its entry must go.
def case(block: Block) -> Any:
    marks = []
    if block.mark == ("run", "pytest"):
        marks.append(pytest.mark.slow)  # a fresh interpreter and pytest: seconds
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [case(block) for block in BLOCKS])
def test_the_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check(block, tmp_path)


def test_every_python_block_is_collected() -> None:
    """The parser finds every fence `OPEN` matches, and every mark precedes a block."""
    for name, page in PAGES.items():
        text = (ROOT / name).read_text()
        assert len(page.blocks) == len(OPEN.findall(text)), name
        assert page.stray_marks == [], f"{name}: marks before no block, lines {page.stray_marks}"
    assert len(BLOCKS) >= 18


# -- the collector itself, on a sample page -----------------------------------------------

SAMPLE = """# A page

```python
x = 1 + 1
assert x == 2
```

<!-- prelude: client -->

```python
value = client.generate("Hi")
```

```python
undefined_name.call()
```

<!-- signature: lmclient.Client.generate_many -->
```python
generate_many(prompts, output_type=str, *, concurrency=16) -> list
```

<!-- prelude: client -->
some prose, so this mark is stray
"""


def sample() -> Page:
    return parse("sample.md", SAMPLE)


def test_the_sample_is_parsed() -> None:
    page = sample()
    assert [b.mark for b in page.blocks] == [
        None,
        ("prelude", "client"),
        None,
        ("signature", "lmclient.Client.generate_many"),
    ]
    assert [b.line for b in page.blocks] == [3, 10, 14, 19]
    assert page.stray_marks == [23]


def test_an_unmarked_block_that_breaks_fails(tmp_path: Path) -> None:
    page = sample()
    check(page.blocks[0], tmp_path)
    with pytest.raises(NameError, match="undefined_name"):
        check(page.blocks[2], tmp_path)


def test_a_prelude_gives_a_client_on_the_fake(tmp_path: Path) -> None:
    block = sample().blocks[1]
    with prepared("client", tmp_path) as (namespace, rewrite):
        execute(rewrite(block.code), namespace, block.id)
        assert namespace["value"] == "This is a fake reply."


def test_an_unknown_prelude_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = Block("sample.md", 1, "x = 1\n", ("prelude", "nonesuch"))
    monkeypatch.setitem(PAGES, "sample.md", Page([block], []))
    with pytest.raises(AssertionError, match="unknown prelude 'nonesuch'"):
        check(block, tmp_path)


def test_a_signature_that_drifted_fails(tmp_path: Path) -> None:
    block = sample().blocks[3]  # omits return_exceptions, on_result, usage and **params
    with pytest.raises(AssertionError, match="the doc writes"):
        check(block, tmp_path)
    right = "generate_many(prompts, output_type=str, *, concurrency=16, return_exceptions=False,\n"
    right += "              on_result=None, usage=None, **params) -> list\n"
    check(dataclasses.replace(block, code=right), tmp_path)


def test_a_test_file_must_be_marked_to_run_its_tests(tmp_path: Path) -> None:
    block = Block("sample.md", 1, "def test_it() -> None:\n    assert 1 == 2\n", None)
    with pytest.raises(AssertionError, match="mark it 'run: pytest'"):
        check(block, tmp_path)


@pytest.mark.slow
def test_a_pytest_block_with_a_failing_test_fails(tmp_path: Path) -> None:
    block = Block("sample.md", 1, "def test_it() -> None:\n    assert 1 == 2\n", ("run", "pytest"))
    with pytest.raises(AssertionError, match="1 failed"):
        check(block, tmp_path)
