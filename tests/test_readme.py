"""The code blocks of the README and of the docs pages run as written, and print what they say.

Every block of the README runs: its Python blocks each on their own, its shell blocks (``sh``,
``bash``, ``console``) in a cache of their own, except the first, the two setup commands, which
CI runs itself (``.ci/run``, ``scripts/test.sh``). On a docs page, every Python block runs, the
page's blocks in order in one namespace, and so does every ``console`` block; other blocks there
(``sh``, ``toml``, plain) are illustrations.

A Python block's ``# prints:`` comments are, in order, the lines it prints; a ``sh``/``bash``
block's are the lines its commands print. A ``console`` block is a transcript: each ``$ `` line
is a command that must exit 0, and the lines after it are what it writes to standard output,
where ``...`` stands for any text and spacing is not compared.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PRINTS = re.compile(r"#.*?prints: (.*)$", re.M)
SHELL = ("sh", "bash", "console")
SETUP = ["bash scripts/demo.sh", "bash scripts/test.sh"]


def blocks(path: Path) -> list[tuple[str, str]]:
    """(language, text) of each fenced block of a Markdown file, in order."""
    return FENCE.findall(path.read_text())


README_BLOCKS = blocks(README)
PYTHON = [text for lang, text in README_BLOCKS if lang == "python"]
SHELL_BLOCKS = [text for lang, text in README_BLOCKS[1:] if lang in SHELL]
PAGES = sorted(
    page.relative_to(DOCS).as_posix()
    for page in DOCS.rglob("*.md")
    if any(lang in ("python", "console") for lang, _ in blocks(page))
)


def commands(text: str) -> list[str]:
    """A shell block's lines, comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def printed_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def said(block: str) -> list[str]:
    return [m.group(1).rstrip() for m in PRINTS.finditer(block)]


def test_the_readme_opens_with_the_two_commands_ci_runs():
    lang, text = README_BLOCKS[0]
    assert lang in SHELL and commands(text) == SETUP
    ci = commands((ROOT / ".ci" / "run").read_text())
    # Run as it is, or under the meter of the suite's budget.
    assert ci[-1].rpartition(" -- ")[2] == "bash scripts/test.sh"


def test_every_readme_block_runs():
    """A block meant not to run belongs in the docs: the README has only blocks run here."""
    assert [lang for lang, _ in README_BLOCKS if lang not in ("python", *SHELL)] == []
    assert SHELL_BLOCKS, "the README shows the specialize command at work"


def test_the_readme_has_blocks_that_say_what_they_print():
    assert len(PYTHON) >= 4 and all(PRINTS.search(b) for b in PYTHON)


@pytest.fixture(scope="module")
def readme_cache(tmp_path_factory):
    """One cache for the blocks, none of the session's: a block may clear its cache."""
    return str(tmp_path_factory.mktemp("readme-cache"))


def run_python(text: str, name: str, namespace: dict, tdev: str) -> list[str]:
    """What a block prints, run in ``namespace`` with its tensors on ``tdev``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), torch.device(tdev):
        exec(compile(text, name, "exec"), namespace)
    return printed_lines(out.getvalue())


def block_module(name: str, monkeypatch) -> types.ModuleType:
    """A module of its own, as a script's would be: torch.compile looks its globals' module up."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module


@pytest.mark.parametrize("number", range(len(PYTHON)))
def test_a_readme_block_runs_and_prints_what_it_says(number, readme_cache, tdev, monkeypatch):
    import torch._dynamo

    block = PYTHON[number]
    monkeypatch.setenv("SLANGSPEC_CACHE_DIR", readme_cache)
    monkeypatch.chdir(ROOT)
    torch._dynamo.reset()
    module = block_module(f"readme_block_{number + 1}", monkeypatch)
    name = f"README.md python block {number + 1}"
    assert run_python(block, name, module.__dict__, tdev) == said(block)


def shell_env(tmp_path: Path) -> dict[str, str]:
    """The environment a shell block runs in: a cache and a home directory of its own, this
    interpreter's scripts (``specialize``, ``python``) first on the path, or, where slangspec
    is not installed, a ``specialize`` that runs its module."""
    env = dict(os.environ)
    (tmp_path / "home").mkdir(parents=True)
    env["HOME"] = str(tmp_path / "home")
    env["SLANGSPEC_CACHE_DIR"] = str(tmp_path / "cache")
    env["XDG_CACHE_HOME"] = str(tmp_path / "home" / ".cache")
    scripts = Path(sys.executable).parent
    env["PATH"] = os.pathsep.join([str(scripts), env.get("PATH", "")])
    if shutil.which("specialize", path=str(scripts)) is None:
        # slangspec on the path but not installed (as on the GPU machine): its module runs it.
        shim = tmp_path / "bin" / "specialize"
        shim.parent.mkdir()
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m slangspec "$@"\n')
        shim.chmod(0o755)
        env["PATH"] = os.pathsep.join([str(shim.parent), env["PATH"]])
    return env


def bash(text: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_shell(lang: str, text: str, where: str, tmp_path: Path) -> None:
    env = shell_env(tmp_path)
    if lang != "console":
        done = bash(text, env)
        assert done.returncode == 0, f"{where}\n{done.stdout}\n{done.stderr}"
        if said(text):
            assert printed_lines(done.stdout) == said(text), where
        return
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{where}: a transcript starts with a '$ ' command"
            steps[-1][1].append(line)
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for command, want in steps:
        done = bash(command, env)
        assert done.returncode == 0, f"{where}: $ {command}\n{done.stdout}\n{done.stderr}"
        expected = "".join(line + "\n" for line in want)
        assert checker.check_output(expected, done.stdout, flags), (
            f"{where}: $ {command}\nexpected:\n{expected}\ngot:\n{done.stdout}"
        )


@pytest.mark.parametrize("number", range(len(SHELL_BLOCKS)))
def test_a_readme_shell_block_runs_and_prints_what_it_says(number, tmp_path):
    langs = [lang for lang, _ in README_BLOCKS[1:] if lang in SHELL]
    run_shell(langs[number], SHELL_BLOCKS[number], f"README.md shell block {number + 1}", tmp_path)


@pytest.mark.parametrize("page", PAGES)
def test_a_docs_page_runs_and_prints_what_it_says(page, tdev, tmp_path, monkeypatch):
    """A page's Python blocks in order, sharing one namespace; its transcripts on their own."""
    import torch._dynamo

    monkeypatch.setenv("SLANGSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    torch._dynamo.reset()
    module = block_module("docs_" + re.sub(r"\W", "_", page.removesuffix(".md")), monkeypatch)
    for number, (lang, text) in enumerate(blocks(DOCS / page), 1):
        where = f"docs/{page} block {number}"
        if lang == "python":
            assert run_python(text, where, module.__dict__, tdev) == said(text), where
        elif lang == "console":
            run_shell(lang, text, where, tmp_path / f"shell-{number}")


def test_the_demo_trains_and_times_a_cold_and_a_warm_first_step(tmp_path, kind):
    """The payload of the README's first command (``scripts/demo.sh``, whose setup CI runs)."""
    done = subprocess.run(
        [sys.executable, "examples/quickstart.py", "--steps", "30", "--device", kind,
         "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.startswith(f"device: {kind} (")
    assert "fitted coeffs: [" in out and "cold cache" in out and "warm cache" in out
