"""The documentation site builds with no warning, documents every command, and the README's
links into it land on a page and heading that exist."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from slangspec.cli import main

ROOT = Path(__file__).parent.parent
HEADING = re.compile(r"<h([1-6])[^>]*>(.*?)</h\1>", re.S)
ID = re.compile(r'\bid="([^"]+)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as CI builds it: strict, and any warning at all fails."""
    if importlib.util.find_spec("mkdocs") is None and not os.environ.get("CI"):
        pytest.skip("MkDocs (the dev extra) is not installed here; CI installs it")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert [line for line in log.splitlines() if "WARNING" in line] == []
    return out


def nav_pages() -> list[str]:
    """Every page the site's navigation lists."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True

    def walk(items) -> list[str]:
        found = []
        for item in items:
            target = next(iter(item.values())) if isinstance(item, dict) else item
            found += walk(target) if isinstance(target, list) else [target]
        return found

    return walk(config["nav"])


def built(site: Path, page: str) -> str:
    """The HTML a page of the site was built into (directory URLs, MkDocs' default)."""
    stem = page.removesuffix(".md")
    return (site / ("" if stem == "index" else stem) / "index.html").read_text()


def headings(text: str) -> list[str]:
    """A page's headings as text, tags and the permalink's mark left out."""
    texts = (html.unescape(re.sub(r"<[^>]+>", "", h)) for _, h in HEADING.findall(text))
    return [" ".join(t.replace("\N{PILCROW SIGN}", "").split()) for t in texts]


def commands(group: click.Group, prefix: str = "specialize") -> list[str]:
    """Every command the ``specialize`` parser has, subcommands of groups included."""
    found = []
    for name, command in sorted(group.commands.items()):
        found.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix} {name}")
    return found


def test_the_site_builds_and_lists_every_page_of_the_docs(site):
    pages = nav_pages()
    on_disk = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(pages) == on_disk
    for page in pages:
        assert built(site, page)


def test_every_command_has_a_heading_on_a_page_of_the_navigation(site):
    documented = {h for page in nav_pages() for h in headings(built(site, page))}
    wanted = commands(main)
    assert "specialize cache verify" in wanted and "specialize warm" in wanted
    assert [c for c in wanted if c not in documented] == []


def test_the_readme_links_into_the_site_land_on_a_page_and_heading(site):
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+\.md)(?:#([^)\s]+))?\)", readme)
    assert len(links) >= 10
    pages = nav_pages()
    for target, anchor in links:
        page = target.removeprefix("docs/")
        assert page in pages, target
        if anchor:
            assert anchor in ID.findall(built(site, page)), f"{target}#{anchor}"


def test_the_package_points_at_pages_of_the_docs():
    """What the package tells its users to read (help texts, docstrings) is a page of the docs,
    not a section of the README, which keeps only an overview."""
    pages = nav_pages()
    for path in sorted((ROOT / "src" / "slangspec").rglob("*.py")):
        text = path.read_text()
        assert "README" not in text, path
        for target in re.findall(r"\bdocs/([\w/]+\.md)", text):
            assert target in pages, f"{path}: docs/{target}"
