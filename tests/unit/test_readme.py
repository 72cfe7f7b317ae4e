"""The README and the docs/ pages only point at things that exist: every command in a shell block
names a real make target, management command or module, and every link and repository path is
there. The commands themselves run in their own tests (make demo's path in test_cli, make test
everywhere); here they are checked, not run, so that a rename breaks this test and not a reader."""

from __future__ import annotations

import importlib.util
import re
import shlex

import pytest
from django.core.management import get_commands

from tests.support.documents import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A repository path as prose writes it: a top-level folder, then a plain path (no <placeholder>,
# {alternatives} or glob).
REPO_PATH = re.compile(r"`((?:apps|workers|ocrsite|tests|bench|k8s|compose|clients|docs|requirements|\.ci)/[\w./-]*)`")
# Made by a run, not committed: named so a reader knows where to look.
MADE_BY_RUNS = (
    "tests/azurite/node_modules",
    "tests/artifacts/",
    "bench/results/report-YYYY-MM-DD.md",
    "bench/results/eval-",  # make eval, make eval-ci
    "bench/results/runs/",
)


def _shell_lines(text: str) -> list[str]:
    """Each line of the shell blocks, and each inline `make …` or `… manage.py …` of the prose."""
    lines = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        lines += [line.split(" #", 1)[0].strip() for line in joined.splitlines() if line.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    lines += [span for span in re.findall(r"`([^`\n]+)`", prose) if span.startswith("make ") or "manage.py " in span]
    return lines


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w-]+):", makefile, flags=re.M))


def _commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split on ;, && and ||), environment assignments dropped."""
    out = []
    for part in re.split(r";|&&|\|\|", line):
        try:
            words = shlex.split(part, posix=True)
        except ValueError:  # a quote that closes on a later line of the block
            words = part.split()
        while words and re.match(r"^\w+=", words[0]):
            words = words[1:]
        if words:
            out.append(words)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_in_a_shell_block_names_something_that_exists(page):
    targets, commands = _make_targets(), set(get_commands())
    checked = 0
    for line in _shell_lines(page.read_text()):
        for words in _commands(line):
            if words[0] == "make":
                for target in (w for w in words[1:] if not w.startswith("-") and "=" not in w):
                    assert target in targets, f"{page.name}: `{line}` names make target {target!r}, not in the Makefile"
                    checked += 1
            python = [w for w in words if not w.startswith("-")]
            if "manage.py" in python and python.index("manage.py") + 1 < len(python):
                command = python[python.index("manage.py") + 1]
                assert command in commands, f"{page.name}: `{line}` runs manage.py {command!r}, which does not exist"
                checked += 1
            if "-m" in words and words.index("-m") + 1 < len(words):
                module = words[words.index("-m") + 1]
                assert importlib.util.find_spec(module) is not None, f"{page.name}: `{line}`: no module {module!r}"
                checked += 1
            if words[0] == "bash" and len(words) > 1 and not words[1].startswith("-"):
                assert (ROOT / words[1]).exists(), f"{page.name}: `{line}` runs {words[1]}, which is not there"
                checked += 1
    if page.name == "README.md":
        assert checked >= 5, "the README's commands were not found: has its shell block format changed?"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_repository_path_exists(page):
    text = page.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.name} links to {target}, which is not there"
    for path in REPO_PATH.findall(text):
        if path.startswith(MADE_BY_RUNS):
            continue
        module, _, attribute = path.rpartition(".")  # apps/jobs/services.submit: a name in a module
        dotted = attribute.isidentifier() and attribute not in ("py", "md", "txt", "yaml", "yml", "json", "sh")
        found = (ROOT / path).exists() or (dotted and ((ROOT / f"{module}.py").exists() or (ROOT / module).is_dir()))
        assert found, f"{page.name} names `{path}`, which is not there"


def test_the_readme_stays_a_guide():
    """What it is, the two commands, the API, the map, how to add, and links: long text has a page."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 350
    for heading in ("## Two commands", "## The API in three lines", "## The map of the code", "## How to add"):
        assert heading in readme
