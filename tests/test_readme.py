"""Every Python block of the README runs as written, and prints what its comments say."""

import contextlib
import io
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
PRINTS = re.compile(r"#.*?prints: (.*)$", re.M)


def test_the_readme_has_blocks_that_say_what_they_print():
    assert len(BLOCKS) >= 4 and all(PRINTS.search(b) for b in BLOCKS)


@pytest.fixture(scope="module")
def readme_cache(tmp_path_factory):
    """One cache for the blocks, none of the session's: the last block clears its cache."""
    return str(tmp_path_factory.mktemp("readme-cache"))


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_a_readme_block_runs_and_prints_what_it_says(number, readme_cache, tdev, monkeypatch):
    import torch._dynamo

    block = BLOCKS[number]
    monkeypatch.setenv("SLANGSPEC_CACHE_DIR", readme_cache)
    monkeypatch.chdir(ROOT)
    torch._dynamo.reset()
    out = io.StringIO()
    # Tensors the block makes land where this device's kernels read them.
    # A module of its own, as a script's would be: torch.compile looks its globals' module up.
    module = types.ModuleType(f"readme_block_{number + 1}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with contextlib.redirect_stdout(out), torch.device(tdev):
        exec(compile(block, f"README.md block {number + 1}", "exec"), module.__dict__)
    printed = [line.rstrip() for line in out.getvalue().splitlines()]
    assert printed == [m.group(1).rstrip() for m in PRINTS.finditer(block)]
