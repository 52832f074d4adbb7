"""Print the README's Quick start commands, one per line, exactly as the README gives them.

``.ci/run`` runs what this prints, so CI runs the commands a newcomer copies from the README
and the two cannot drift (tests/test_readme.py checks what they install with).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start_commands(text: str) -> list[str]:
    """The non-comment lines of the first ``bash`` block under ``## Quick start``."""
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    if block is None:
        raise SystemExit("README.md: no bash block under '## Quick start'")
    return [line.strip() for line in block.group(1).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


if __name__ == "__main__":
    for command in quick_start_commands(README.read_text()):
        print(command)
