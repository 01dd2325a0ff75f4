"""The README a person reads in five minutes (issue 23): at most 250 lines, its two set-up
commands and the mission's commands as written, and every relative link in it and in docs/
pointing at a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(markdown: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", markdown.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_the_readme_is_short_and_keeps_the_commands_people_type():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    for command in ("scripts/demo.sh", "scripts/test.sh", "docker compose up tgi",
                    "locust -f loadtest/engines.py --users 128", "scripts/sweep_threads.sh"):
        assert command in text, command


@pytest.mark.parametrize("markdown", [README, *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(markdown: Path):
    broken = []
    for target in LINK.findall(markdown.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        file = (markdown.parent / path).resolve() if path else markdown
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, f"{markdown.name}: {broken}"
