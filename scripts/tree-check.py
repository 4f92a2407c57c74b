#!/usr/bin/env python3
"""Keeps a crate's tree simple (`just lint` runs it on host/src): fails when files import each
other in a circle, or when a function is longer than MAX_FUNCTION_LINES.

Circles.

Every module path in a file (`crate::a::b`, `super::b`, `self::c`, and a child module's name in
the module that declares it), in a `use` or in an expression, is resolved to the file that
defines the item; a name a module re-exports (`pub use child::Item`) leads on to the file that
defines it, so a facade `mod.rs` is not a knot of its own. Comments and string literals are
skipped (a doc link names a module without using it); a file's own `mod tests` counts as part
of it. Two files that need each other are one concern split in two, or a lower layer reaching
up: either way a reader has to hold both at once.

Long functions. A function (tests included) of more than MAX_FUNCTION_LINES lines, counted from
its `fn` to its closing brace, does more than a reader can follow in one go: split it where it
changes concern.
"""
import re
import sys
from pathlib import Path

ANCHORED = re.compile(r"(?<![A-Za-z0-9_:])(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)(::\{[^}]*\})?")
RELATIVE = re.compile(r"(?<![A-Za-z0-9_:])([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{[^}]*\})?")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", re.M)
REEXPORT = re.compile(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);")
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe|extern \"C\")\s+)*fn\s+(\w+)")
MAX_FUNCTION_LINES = 100


def code_only(text: str) -> str:
    """The source without comments and string or char literals (one pass, as the lexer reads it)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                depth += text.startswith("/*", i) - text.startswith("*/", i)
                i += 2 if text.startswith(("/*", "*/"), i) else 1
        elif (raw := re.match(r"b?r(#*)\"", text[i:])) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + raw.group(1), i + raw.end())
            out.append('""')
            i = n if end < 0 else end + 1 + len(raw.group(1))
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and (lit := re.match(r"'(?:\\.[^']*|[^'\\])'", text[i:])):
            out.append("' '")
            i += lit.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, root: Path):
        self.root = root
        self.files = sorted(root.rglob("*.rs"))
        self.text = {f: code_only(f.read_text()) for f in self.files}
        self.children = {f: set(MOD_DECL.findall(t)) for f, t in self.text.items()}

    def module_of(self, file: Path) -> list[str]:
        parts = list(file.relative_to(self.root).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts.pop()
        return parts

    def file_of(self, module: list[str]):
        """The file of the longest prefix of `module` that is a file, and the rest of the path."""
        for n in range(len(module), -1, -1):
            base = self.root.joinpath(*module[:n])
            candidates = [base.with_suffix(".rs"), base / "mod.rs"] if n else [self.root / "lib.rs"]
            for candidate in candidates:
                if candidate.is_file():
                    return candidate, module[n:]
        return None, module

    def paths(self, text: str, children: set[str]):
        """Every path in `text` as (anchor, segments): an anchor is crate, super, self or a child."""
        def expand(anchor, rest, group):
            segments = [s for s in rest.split("::") if s]
            if not group:
                yield anchor, segments
                return
            for item in group[3:-1].split(","):
                item = item.strip().split(" as ")[0].split("::")[0].strip()
                if item == "self":
                    yield anchor, segments
                elif item and item != "*":
                    yield anchor, segments + [item]

        for m in ANCHORED.finditer(text):
            yield from expand(m.group(1), m.group(2), m.group(3))
        for m in RELATIVE.finditer(text):
            if m.group(1) in children:
                yield from expand("self", m.group(1) + m.group(2), m.group(3))

    def absolute(self, here: list[str], anchor: str, segments: list[str]) -> list[str]:
        if anchor == "crate":
            return segments
        if anchor == "self":
            return here + segments
        base = here[:-1]
        while segments and segments[0] == "super":
            segments, base = segments[1:], base[:-1]
        return base + segments

    def reexports(self, file: Path) -> dict[str, list[str]]:
        """What `pub use` in `file` makes visible there, by name, as absolute module paths."""
        out = {}
        here = self.module_of(file)
        for m in REEXPORT.finditer(self.text[file]):
            text = m.group(1).strip()
            for anchor, segments in self.paths(text, self.children[file]):
                if segments:
                    out[segments[-1]] = self.absolute(here, anchor, segments)
            plain = re.fullmatch(r"([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(?:\s+as\s+(\w+))?", text)
            if plain and plain.group(1) not in ("crate", "super", "self"):
                segments = [plain.group(1)] + [s for s in plain.group(2).split("::") if s]
                out[plain.group(3) or segments[-1]] = self.absolute(here, "self", segments)
        return out

    def resolve(self, module: list[str], depth: int = 0):
        target, rest = self.file_of(module)
        if target is not None and rest and depth < 8:
            via = self.reexports(target).get(rest[0])
            if via is not None and via != module[: len(module) - len(rest) + 1]:
                return self.resolve(via + rest[1:], depth + 1)
        return target

    def imports(self, file: Path) -> set[Path]:
        module = self.module_of(file)
        body, _, tests = self.text[file].partition("mod tests {")
        found = set()
        # The tests module at a file's end is one level below the file's module.
        for here, part in ((module, body), (module + ["tests"], tests)):
            for anchor, segments in self.paths(part, self.children[file]):
                target = self.resolve(self.absolute(here, anchor, segments))
                if target is not None and target != file:
                    found.add(target)
        return found


def circles(graph: dict) -> list[list[Path]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def long_functions(crate: Crate) -> list[str]:
    """Functions longer than MAX_FUNCTION_LINES, as `file:line name (lines)`."""
    found = []
    for file in crate.files:
        lines = crate.text[file].split("\n")
        for start, line in enumerate(lines):
            m = FN.match(line)
            if not m:
                continue
            depth, opened, end = 0, False, start
            for end in range(start, len(lines)):
                if not opened and lines[end].rstrip().endswith(";"):
                    break
                for ch in lines[end]:
                    depth += {"{": 1, "}": -1}.get(ch, 0)
                    opened = opened or ch == "{"
                if opened and depth == 0:
                    break
            if opened and end - start + 1 > MAX_FUNCTION_LINES:
                found.append(f"{file.relative_to(crate.root)}:{start + 1} {m.group(1)} ({end - start + 1} lines)")
    return found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    # `--functions-only`: a crate whose files still import each other (the declarative engine)
    # is held to the function length alone.
    functions_only = "--functions-only" in sys.argv[1:]
    root = Path(args[0] if args else "host/src")
    crate = Crate(root)
    # The crate root names every module by design (and re-exports the public API): not a node.
    nodes = [f for f in crate.files if not (f.parent == root and f.name in ("lib.rs", "main.rs"))]
    found = []
    if not functions_only:
        graph = {f: {t for t in crate.imports(f) if t in nodes} for f in nodes}
        found = circles(graph)
        for component in found:
            print(f"import circle in {root}: " + " <-> ".join(str(f.relative_to(root)) for f in component))
            for f in component:
                needs = sorted(str(t.relative_to(root)) for t in graph[f] if t in component)
                print(f"  {f.relative_to(root)} uses {', '.join(needs)}")
    long = long_functions(crate)
    for function in long:
        print(f"function over {MAX_FUNCTION_LINES} lines in {root}: {function}")
    if found or long:
        sys.exit(1)
    circles_said = "" if functions_only else "no import circles, "
    print(f"{root}: {len(nodes)} files, {circles_said}no function over {MAX_FUNCTION_LINES} lines")


if __name__ == "__main__":
    main()
