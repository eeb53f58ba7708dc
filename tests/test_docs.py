"""The README and docs/ against the code: every option, exit code and setting, and every link."""

from __future__ import annotations

import re

import click
import pytest

from edgecli import errors
from edgecli.cli import main

from .media import REPO

USAGE = REPO / "docs" / "usage.md"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OPTION_NAME = re.compile(r"(?<![\w-])--?[a-z][a-z0-9-]*")
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?!\w)")  # 1,283 or 0.71, not in a hash
LINK = re.compile(r"\]\(([^)\s]+)\)")
EXIT_TABLES = ((REPO / "README.md", "## Exit codes"), (USAGE, "## Exit codes and errors"))


def section(text: str, heading: str) -> str:
    """The body of the Markdown section whose heading line is ``heading``, up to the next
    heading of the same or a higher level."""
    level = heading.split(" ")[0]
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"#{{1,{len(level)}}} ", lines[i])),
        len(lines),
    )
    return "\n".join(lines[start:end])


def table_rows(body: str) -> list[list[str]]:
    """The cells of each row of the Markdown tables in ``body``, header and rule left out."""
    rows = []
    for line in body.splitlines():
        if re.match(r"\|[-: |]+\|$", line):
            rows.pop()  # the header above the rule
        elif line.startswith("|"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def documented_options(command: str) -> dict[str, tuple[str, str]]:
    """Each option name in the first cell of the table of ``edgecli COMMAND``'s options in
    docs/usage.md: the row's first cell and its default cell."""
    body = section(USAGE.read_text(), f"## Options of `edgecli {command}`")
    found = {}
    for row in table_rows(body):
        for name in OPTION_NAME.findall(row[0]):
            found[name] = (row[0], row[1])
    return found


def code_options(command: str) -> list[click.Option]:
    params = main.commands[command].params
    return [param for param in params if isinstance(param, click.Option)]


@pytest.mark.parametrize("command", ["run", "preview", "info"])
def test_every_option_is_documented_with_its_values_and_default(command):
    """Each option of each command is a row of docs/usage.md's table for that command, with
    the code's choices in the code's order and the default the code shows."""
    documented = documented_options(command)
    for option in code_options(command):
        for name in option.opts:
            assert name in documented, f"edgecli {command} {name} is not in docs/usage.md"
        first, default = documented[option.opts[-1]]
        choices = getattr(option.type, "choices", None)
        if choices is not None:
            assert "\\|".join(choices) in first, f"{option.opts[-1]}: {first}"
        if option.show_default is True and option.default is not None:
            assert str(option.default) in default, f"{option.opts[-1]}: default {default}"


@pytest.mark.parametrize("command", ["run", "preview", "info"])
def test_no_option_is_documented_that_the_command_lacks(command):
    """Every option name docs/usage.md lists for a command is one the command takes."""
    names = {name for option in code_options(command) for name in option.opts}
    assert set(documented_options(command)) <= names | {"-h", "--help"}


def test_every_exit_code_is_in_the_readme_and_usage():
    """Each exit code edgecli.errors defines is a row of the README's and docs/usage.md's
    exit-code tables, and neither table has a code the package lacks."""
    codes = {str(value) for name, value in vars(errors).items() if name.startswith("EXIT_")}
    for page, heading in EXIT_TABLES:
        rows = table_rows(section(page.read_text(), heading))
        listed = {code.strip() for row in rows for code in row[0].split("/")}
        assert listed == codes, f"{page.name}: {sorted(listed)} against {sorted(codes)}"


def test_every_environment_variable_of_edgecli_is_documented():
    """Every EDGECLI_* environment variable named in the package is described in
    docs/usage.md's Environment section."""
    names = set()
    for path in (REPO / "edgecli").rglob("*.py"):
        names |= set(re.findall(r"\"(EDGECLI_[A-Z0-9_]+)\"", path.read_text()))
    assert names, "no EDGECLI_ variable found: the search is wrong"
    body = section(USAGE.read_text(), "## Environment")
    assert {name for name in names if f"`{name}" not in body} == set()


def slug(heading: str) -> str:
    """The anchor a code host gives a heading: lower case, punctuation but - and _ dropped,
    spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(), flags=re.MULTILINE)
    return {slug(heading) for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_resolve(page):
    """Every relative link of the README and docs/ names a file that exists, and a heading
    of a Markdown file where it names one."""
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert broken == []


def test_every_figure_in_performance_stands_in_results():
    """Each number docs/performance.md quotes as a figure is one benchmarks/RESULTS.md holds,
    so a regenerated RESULTS cannot leave the page quoting a run that is gone."""
    page = (REPO / "docs" / "performance.md").read_text()
    results = (REPO / "benchmarks" / "RESULTS.md").read_text()
    quoted = [row[1] for row in table_rows(section(page, "## Current figures"))]
    quoted.append(section(page, "## Scaling out"))
    figures = {n for text in quoted for n in NUMBER.findall(text)}
    assert len(figures) > 20, "the figures were not found: the page's layout changed"
    missing = {
        n for n in figures if not re.search(rf"(?<![\d.,]){re.escape(n)}(?![\d,]|\.\d)", results)
    }
    assert missing == set()
