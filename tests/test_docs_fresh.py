"""The documentation says what the code does.

Docs drift silently: a renamed flag, a deleted page, an example that no longer runs.
These tests check the claims that can be checked mechanically: the state diagrams
match the transition tables, the README opens with the set-up commands and its
examples run against a real broker, every command line in the performance page is
accepted by the tool it names, links point at files that exist, the changelog has the
project's version, and the docs state what is rather than narrate history.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from quasar.testing.process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PERFORMANCE = DOCS / "performance.md"
USER_DOCS = [README, ROOT / "benchmarks" / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
EXAMPLE_URL = "pulsar://127.0.0.1:6650"


def code_blocks(path: Path, lang: str | None = None) -> list[str]:
    return [
        body
        for block_lang, body in FENCE.findall(path.read_text())
        if lang is None or block_lang == lang
    ]


def command_lines(block: str) -> list[str]:
    """The commands of a shell block: comments dropped, backslash continuations joined."""
    lines = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def run_help(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )


def test_state_diagrams_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_state_diagrams.py"), "--check"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- README ---------------------------------------------------------------------------


def test_readme_opens_with_title_line_and_the_two_setup_commands() -> None:
    lines = README.read_text().splitlines()
    assert lines[0] == "# quasar", "the README starts with its title"
    assert lines[1] == "" and lines[2].strip() and not lines[2].startswith(("#", "`"))
    assert lines[3] == "" and lines[4].startswith("```"), (
        "a short line, then the set-up commands in one code block"
    )
    end = lines.index("```", 5)
    commands = [line.split("#", 1)[0].strip() for line in lines[5:end]]
    assert commands == ["make standalone", "make test"]


def test_readme_setup_targets_exist_in_the_makefile() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("standalone", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"no make target {target}"
    # `make test` runs the whole suite, not a subset.
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "pytest" in recipe and "tests/" not in recipe


@pytest.mark.interop
@pytest.mark.parametrize("index", range(len(code_blocks(README, "python"))))
def test_readme_python_examples_run_as_written(broker: BrokerProcess, index: int) -> None:
    """Each Python example runs unchanged against a broker (only the URL differs)."""
    source = code_blocks(README, "python")[index]
    assert EXAMPLE_URL in source
    result = subprocess.run(
        [sys.executable, "-c", source.replace(EXAMPLE_URL, broker.url)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    # An example that prints says in a comment what it prints.
    for expected in re.findall(r"print\(.*\)\s+# (.+)$", source, re.M):
        assert expected.strip() in result.stdout, (expected, result.stdout)


# --- performance page -----------------------------------------------------------------


def perf_commands() -> list[list[str]]:
    commands = []
    for block in code_blocks(PERFORMANCE):
        for line in command_lines(block):
            words = line.split()
            if words[0] in ("quasar", "python", "make"):
                commands.append(words)
    return commands


def test_performance_page_names_commands_that_exist() -> None:
    commands = perf_commands()
    kinds = {tuple(words[:2]) for words in commands}
    assert ("make", "bench") in kinds
    assert ("python", "benchmarks/run_all.py") in kinds
    assert {words[2] for words in commands if words[:2] == ["quasar", "perf"]} >= {
        "produce", "transaction", "sink",
    }
    makefile = (ROOT / "Makefile").read_text()
    for words in commands:
        if words[0] == "make":
            assert re.search(rf"^{words[1]}:", makefile, re.M), words


def test_performance_page_flags_are_accepted() -> None:
    """Every flag on a command line of the page appears in that command's --help."""
    helps: dict[tuple[str, ...], str] = {}
    for words in perf_commands():
        if words[0] == "quasar":
            tool = ("-m", "quasar.cli.main", *words[1:3])
            flags = words[3:]
        elif words[0] == "python":
            tool = (words[1],)
            flags = words[2:]
        else:
            continue
        if tool not in helps:
            result = run_help(*tool)
            assert result.returncode == 0, (tool, result.stderr)
            helps[tool] = result.stdout
        for flag in flags:
            if flag.startswith("-"):
                assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", helps[tool]), (
                    f"{' '.join(words)}: {flag} is not an option of {' '.join(tool)}"
                )


def test_performance_page_inline_flags_exist() -> None:
    """Flags the text names for run_all.py are options of run_all.py."""
    text = PERFORMANCE.read_text()
    help_text = run_help("benchmarks/run_all.py").stdout
    section = text.split("benchmarks/run_all.py` runs", 1)[1].split("For a single", 1)[0]
    named = set(re.findall(r"`(--[a-z-]+)", section)) - {"--txn-disable"}
    assert named, "the page describes run_all.py's options"
    missing = {flag for flag in named if flag not in help_text}
    assert not missing, missing


def test_performance_page_reports_targets_met_and_not_met() -> None:
    text = PERFORMANCE.read_text()
    assert "## Current figures against the targets" in text
    assert re.search(r"\|\s*met\s*\|", text) and "**not met**" in text
    # Figures are stated against a baseline measured in the same run.
    assert "baseline" in text and "same run" in text


# --- links, changelog, tone -----------------------------------------------------------


REPO_PATH = re.compile(
    r"(?:\]\(|`)((?:\.\./)?(?:docs|benchmarks|tools|examples|src|tests)/[\w./-]+?)"
    r"(?:#[\w-]+)?(?:\)|`)"
)


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_named_in_docs_exist(doc: Path) -> None:
    missing = []
    for ref in REPO_PATH.findall(doc.read_text()):
        if any(ch in ref for ch in "*{<"):  # patterns and placeholders, not paths
            continue
        candidates = [ROOT / ref, doc.parent / ref]
        if not any(c.exists() for c in candidates):
            missing.append(ref)
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_changelog_is_by_version() -> None:
    text = (DOCS / "CHANGELOG.md").read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Unreleased"
    assert version in [h.split()[0] for h in headings], (version, headings)


HISTORY = re.compile(
    r"\bsessions? \d|\bround \d|\bissues? \d|\(issue\b|\.\./shared|benchmarks\.md",
    re.I,
)


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_state_what_is_rather_than_history(doc: Path) -> None:
    hits = [
        f"{doc.name}:{n}: {line.strip()}"
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not hits, "\n".join(hits)
