"""docs/configuration.md is the settings module as it reads the environment: every variable it
reads is listed with its type, default and a line of help, and the page is not stale."""

from __future__ import annotations

import ast

from ocrsite.configuration import ELSEWHERE, HELP, render, variables
from ocrsite.vocabulary import Queue
from tests.support.documents import ROOT


def test_the_committed_page_is_what_the_settings_module_reads_now():
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), "docs/configuration.md is stale: run `make docs` and commit it"


def test_every_variable_read_has_a_line_of_help_and_no_help_is_left_over():
    read = {v.name for v in variables()}
    assert read - set(HELP) == set(), "add a line to ocrsite.configuration.HELP for each"
    assert set(HELP) - read == set(), "these are no longer read by ocrsite/settings.py: drop their help"


def test_a_new_setting_is_found_with_its_type_default_and_choices():
    source = 'A = env_int("OCR_NEW", 2 * 4)\nif A:\n    B = env_choice("OCR_MODE", Queue.CPU.value, tuple(Queue))\n'
    [new, mode] = variables(source)
    assert (new.name, new.kind, new.default) == ("OCR_NEW", "integer", "8")
    assert (mode.name, mode.kind, mode.default, mode.choices) == ("OCR_MODE", "choice", "cpu", ",".join(Queue))


def test_variables_read_elsewhere_are_read_where_the_page_says():
    for name, (where, _) in ELSEWHERE.items():
        assert name in (ROOT / where).read_text(), f"{name} is not read in {where}"


def test_the_settings_module_reads_the_environment_only_through_the_typed_helpers():
    """A setting read with ``os.environ`` or ``os.getenv`` has no type, default or help the page
    can show: the setting recipe's first step is a helper of ``ocrsite/env.py``."""
    tree = ast.parse((ROOT / "ocrsite" / "settings.py").read_text())
    raw = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")
    ]
    assert raw == [], "read these through ocrsite/env.py's helpers"
