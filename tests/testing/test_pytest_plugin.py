"""The pytest plugin: what it imports, the ``fake_llm`` fixture in its modes, the example file
and the example in docs/testing.md, and the plugin from a fresh virtualenv built from this checkout.

Test projects run in a pytest subprocess. This checkout's plugin is loaded with ``-p`` and the
installed entry point of the same name blocked (``-p no:lmclient``), so the tests exercise the
code here whether or not the development environment was installed after the entry point was
added; the fresh-virtualenv test exercises the entry point itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest subprocess per test (the fresh virtualenv: ~20 s)

REPO = Path(__file__).resolve().parents[2]
PLUGIN = ["-p", "no:lmclient", "-p", "lmclient.testing.pytest_plugin"]
TIMEOUT = 120


def clean_env() -> dict[str, str]:
    """The environment without settings that would change how pytest or Python start."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON", "COV_"))}


def run_pytest(
    python: str, directory: Path, *args: str, plugin: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    if plugin:
        command[3:3] = PLUGIN
    return subprocess.run(
        command,
        cwd=directory,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def write_project(directory: Path, tests: str, ini: str = "") -> None:
    (directory / "pytest.ini").write_text("[pytest]\n" + ini)  # also makes it the rootdir
    (directory / "test_project.py").write_text(textwrap.dedent(tests))


def test_importing_the_plugin_adds_only_two_small_modules() -> None:
    """Not msgspec, httpx, respx nor the fake: only the plugin and its lazy package."""
    script = """
import sys
import pytest, lmclient  # loaded in any session that has lmclient installed
before = set(sys.modules)
import lmclient.testing.pytest_plugin
added = set(sys.modules) - before
print(sorted(m for m in added if m.split(".")[0] not in sys.stdlib_module_names))
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
        env=clean_env(),
    )
    assert result.stdout.strip() == "['lmclient.testing', 'lmclient.testing.pytest_plugin']"


FIXTURE_TESTS = """
    import json
    import sys
    import urllib.request

    import httpx
    import pytest

    import lmclient


    def test_served_for_any_http_client(fake_llm):
        assert fake_llm.base_url.startswith("http://127.0.0.1:")
        fake_llm.reply("from the fake")
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(
            fake_llm.base_url + "/chat/completions", data=body,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            answer = json.load(response)
        assert answer["choices"][0]["message"]["content"] == "from the fake"
        with lmclient.Client(fake_llm.base_url) as client:
            assert client.generate("hi") == "from the fake"
        assert "respx" not in sys.modules


    def test_each_test_gets_a_fresh_fake(fake_llm):
        assert fake_llm.requests == []
        assert fake_llm.pending == 0


    @pytest.mark.fake_llm(server="sglang", seed=5, models=["m1"], default_text="hello")
    def test_marker_options(fake_llm):
        with lmclient.Client(fake_llm.base_url) as client:
            assert client.generate("hi") == "hello"
            assert client.dialect == "sglang"
            assert client.model == "m1"
        assert fake_llm.seed == 5


    @pytest.mark.fake_llm(mode="respx")
    def test_respx_mode(fake_llm):
        assert fake_llm.base_url == "http://fake-llm.test/v1"
        assert "respx" in sys.modules
        with lmclient.Client(fake_llm.base_url) as client:
            assert isinstance(client.generate("hi", int), int)
        assert httpx.get(fake_llm.base_url + "/models").status_code == 200


    @pytest.mark.fake_llm(mode="carrier-pigeon")
    def test_bad_mode(fake_llm):
        pass
"""


def test_fixture_modes_and_markers(tmp_path: Path) -> None:
    write_project(tmp_path, FIXTURE_TESTS)
    # respx's own pytest plugin would import respx in every session: blocked, so that the
    # tests above see whether the fixture imports it
    result = run_pytest(sys.executable, tmp_path, "-rA", "-p", "no:respx")
    assert "4 passed, 1 error" in result.stdout, result.stdout + result.stderr
    assert "fake_llm mode must be one of" in result.stdout


def test_ini_option_sets_the_default_mode(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        """
        def test_mode(fake_llm):
            assert fake_llm.base_url == "http://fake-llm.test/v1"
        """,
        ini="fake_llm_mode = respx\n",
    )
    result = run_pytest(sys.executable, tmp_path)
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def test_marker_is_registered_for_strict_markers(tmp_path: Path) -> None:
    write_project(tmp_path, "def test_nothing(): pass\n", ini="addopts = --strict-markers\n")
    result = run_pytest(sys.executable, tmp_path, "--markers")
    assert "@pytest.mark.fake_llm(mode='serve'|'respx'" in result.stdout


def test_the_example_file_passes() -> None:
    result = run_pytest(sys.executable, REPO, "examples/test_with_fake.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b6 passed\b", result.stdout), result.stdout


def test_the_docs_example_passes(tmp_path: Path) -> None:
    page = (REPO / "docs" / "testing.md").read_text()  # its first Python block
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_readme.py").write_text(code)
    result = run_pytest(sys.executable, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b3 passed\b", result.stdout), result.stdout


FRESH_TESTS = """
    from typing import Literal

    import msgspec
    import pytest

    import lmclient


    class Person(msgspec.Struct):
        name: str
        age: int


    def test_generated(fake_llm):
        with lmclient.Client(fake_llm.base_url) as client:
            assert isinstance(client.generate("Invent a person.", Person), Person)
        fake_llm.assert_called(times=1, with_output_type=Person)


    @pytest.mark.fake_llm(mode="respx", server="tgi")
    def test_respx_tgi(fake_llm):
        fake_llm.fail(503, retry_after=0)
        with lmclient.Client(fake_llm.base_url) as client:
            assert client.generate("Ok?", Literal["yes", "no"]) in ("yes", "no")
        assert len(fake_llm.calls) == 2
"""


@pytest.mark.timeout(5 * TIMEOUT)  # a venv and a pip install: slow on a busy 2-core machine
def test_plugin_works_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    """``pip install 'lmclient[testing]' pytest`` and nothing else: the entry point loads the
    plugin, and both modes work (pip's cache keeps reruns quick)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=TIMEOUT)
    python = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"{REPO}[testing]", "pytest"],
        capture_output=True, text=True, timeout=TIMEOUT * 2, check=False, env=clean_env(),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    project = tmp_path / "project"
    project.mkdir()
    write_project(project, FRESH_TESTS, ini="addopts = --strict-markers\n")
    result = run_pytest(python, project, plugin=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
