#!/usr/bin/env python3
"""Keeps the docs' performance figures the bench's own (`just lint` checks, `just bench` writes).

Every figure a benchmark measured lives in a report `just bench` wrote, docs/bench/NAME.md. A page
quotes one by including it between two markers:

    <!-- bench: NAME -->
    (the report, without its title: written by `just bench` itself)
    <!-- /bench -->

`--write` copies each report into the blocks that name it (`just bench` runs it last); without it
the script checks that every block holds its report as it is now, and that no page outside
docs/bench states a measured figure elsewhere (a speed ratio such as `3.6x` or `0.9× native`, a
rate in records/s, a "measured on <date>"): a number copied by hand is a number that drifts.
A figure that is not a measurement (a limit, a default) says so in words the patterns below do
not match; a line that must quote one anyway (an issue's own finding, say) ends with
`<!-- not measured here -->`.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "docs" / "bench"
BLOCK = re.compile(r"(<!-- bench: ([a-z0-9-]+) -->\n)(.*?)(<!-- /bench -->)", re.S)
FIGURES = [
    re.compile(r"\b\d+(?:\.\d+)?\s?[x×]\s?(?:native|the CDK|Rust|faster|slower|continual|batched|without|with)\b"),
    re.compile(r"\(\d+(?:\.\d+)?\s?[x×]\)"),
    re.compile(r"\b\d[\d,.]*\s?k?\s?records/s\b"),
    re.compile(r"\b[Mm]easured (?:on |again )?20\d\d-\d\d-\d\d"),
]
EXEMPT = "<!-- not measured here -->"


def pages():
    yield ROOT / "README.md"
    for page in sorted((ROOT / "docs").glob("*.md")):
        yield page


def report(name: str) -> str | None:
    """The report as a page includes it: without its title line."""
    path = REPORTS / f"{name}.md"
    if not path.is_file():
        return None
    text = path.read_text()
    lines = text.split("\n", 1)
    body = lines[1].lstrip("\n") if lines[0].startswith("# ") and len(lines) > 1 else text
    return body if body.endswith("\n") else body + "\n"


def main() -> int:
    write = "--write" in sys.argv[1:]
    problems = []
    for page in pages():
        text = page.read_text()
        rel = page.relative_to(ROOT)

        def fill(match: re.Match) -> str:
            name = match.group(2)
            wanted = report(name)
            if wanted is None:
                problems.append(f"{rel}: the block names docs/bench/{name}.md, which `just bench` has not written")
                return match.group(0)
            if match.group(3) != wanted and not write:
                problems.append(f"{rel}: the block of docs/bench/{name}.md differs from the report (run `just bench-figures`)")
            return match.group(1) + wanted + match.group(4)

        filled = BLOCK.sub(fill, text)
        if write and filled != text:
            page.write_text(filled)
            print(f"updated {rel}")
        outside = BLOCK.sub("", filled)
        for number, line in enumerate(outside.splitlines(), 1):
            if EXEMPT in line:
                continue
            for pattern in FIGURES:
                if found := pattern.search(line):
                    problems.append(
                        f"{rel}: a measured figure outside a bench block, {found.group(0)!r}: include the report "
                        f"that measured it (<!-- bench: NAME -->), or say it without a figure: {line.strip()[:120]}"
                    )
                    break
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
