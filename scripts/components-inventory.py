#!/usr/bin/env python3
"""Inventory of the custom Python components that manifest-only Airbyte connectors ship.

Usage: scripts/components-inventory.py CORPUS_DIR [--compat plugins/components-py]

CORPUS_DIR holds one folder per connector with manifest.yaml, components.py and metadata.yaml
(as extracted from the Airbyte monorepo). For each connector it prints, as markdown:

- every import of components.py, split into airbyte_cdk names, standard library and third party;
- each class it defines, with its bases and the methods it defines (overrides);
- where the manifest refers to a class (`class_name: ...components.X`): the manifest path of the
  definition, the field it sits in and its `type` (CustomTransformation, CustomRecordExtractor, ...).

Then a summary: how often each airbyte_cdk name and each third-party module is imported, and how
often each kind of custom component is used. With --compat DIR it also tries to import every
components.py under `python3 -I` with only DIR and the connector folder on sys.path, and reports
which import and, for the others, the error.

Standard library only (ast, no yaml): the manifest is read line by line, which is enough to find
`class_name` keys, their sibling `type` and the chain of keys above them.
"""

import argparse
import ast
import collections
import os
import re
import subprocess
import sys

CERTIFIED_ORDER = []  # filled from metadata.yaml


# ---------------------------------------------------------------- components.py (ast)


def imports_of(tree):
    """Yield (module, name or None, lineno) for every import in the file, nested ones too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                yield module, alias.name, node.lineno


def classify(module):
    top = module.split(".")[0]
    if module.startswith("."):
        return "local"
    if top == "airbyte_cdk":
        return "airbyte_cdk"
    if top in sys.stdlib_module_names or top == "__future__":
        return "stdlib"
    return "third_party"


def classes_of(tree):
    """Top-level classes: (name, [bases], [methods], lineno, is_dataclass)."""
    out = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b) for b in node.bases]
        methods = [
            n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        is_dc = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
        out.append((node.name, bases, methods, node.lineno, is_dc))
    return out


# ---------------------------------------------------------------- manifest.yaml (lines)

KEY_RE = re.compile(r"^(\s*)(- +)?([A-Za-z_$][\w$-]*|\"[^\"]+\"|'[^']+')\s*:(\s|$)(.*)$")
BLOCK_SCALAR_RE = re.compile(r"^[|>][-+0-9]*\s*(#.*)?$")


def manifest_keys(text):
    """[(lineno, key_column, is_list_item, key, value)] skipping block scalars' bodies."""
    rows = []
    lines = text.splitlines()
    skip_deeper_than = None
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper_than is not None:
            if indent > skip_deeper_than:
                # a block scalar's body: keep it as continuation text of the previous key
                key_row = rows[-1]
                rows[-1] = (key_row[0], key_row[1], key_row[2], key_row[3], (key_row[4] + " " + stripped).strip())
                continue
            skip_deeper_than = None
        m = KEY_RE.match(line)
        if not m:
            continue
        col = len(m.group(1)) + len(m.group(2) or "")
        value = re.sub(r"\s+#.*$", "", m.group(5)).strip()
        key = m.group(3).strip("\"'")
        if BLOCK_SCALAR_RE.match(value):
            skip_deeper_than = col
            value = ""
        rows.append((i, col, bool(m.group(2)), key, value))
    return rows


def block_bounds(rows, idx):
    """Index range [start, end) of the mapping that holds rows[idx]."""
    col = rows[idx][1]
    start = idx
    while not (rows[start][2] and rows[start][1] == col) and start > 0:
        if rows[start - 1][1] < col:
            break
        start -= 1  # a sibling key, or deeper content under one
    end = idx + 1
    while end < len(rows):
        r = rows[end]
        if r[1] < col or (r[1] == col and r[2]):
            break
        end += 1
    return start, end


def path_to(rows, idx):
    """Keys from the document root down to the mapping that holds rows[idx]."""
    path = []
    start, _ = block_bounds(rows, idx)
    col = rows[start][1]
    in_list = rows[start][2]
    j = start - 1
    while j >= 0:
        if rows[j][1] < col:
            key = rows[j][3] + ("[]" if in_list else "")
            path.append(key)
            start, _ = block_bounds(rows, j)
            col = rows[start][1]
            in_list = rows[start][2]
            j = start - 1
            continue
        j -= 1
    return list(reversed(path))


def custom_uses(text):
    """[(class, type, field, path, lineno)] for every class_name in the manifest."""
    rows = manifest_keys(text)
    out = []
    for idx, (lineno, col, _, key, value) in enumerate(rows):
        if key != "class_name":
            continue
        value = value.strip().strip("\"'")
        start, end = block_bounds(rows, idx)
        kind = next((r[4].strip("\"'") for r in rows[start:end] if r[3] == "type" and r[1] == col), "")
        path = path_to(rows, idx)
        field = path[-1].rstrip("[]") if path else ""
        out.append((value, kind, field, "/".join(path), lineno))
    return out


def short_class(class_path):
    for prefix in ("source_declarative_manifest.components.", "components."):
        if class_path.startswith(prefix):
            return class_path[len(prefix):]
    return class_path


def meta_fields(text):
    support = re.search(r"^\s*supportLevel:\s*(\S+)", text, re.M)
    manifest_only = "language:manifest-only" in text
    return (support.group(1) if support else "?"), manifest_only


# ---------------------------------------------------------------- import check


def try_import(compat, folder):
    """Import components.py under `python3 -I` with only compat and the folder on sys.path."""
    code = (
        "import sys\n"
        f"sys.path[:] = [{compat!r}, {folder!r}] + [p for p in sys.path if 'site-packages' not in p and 'dist-packages' not in p]\n"
        "import components\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60
    )
    if proc.returncode == 0:
        return True, ""
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    return False, lines[-1] if lines else f"exit {proc.returncode}"


# ---------------------------------------------------------------- report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--compat", help="plugins/components-py: also try importing each components.py")
    args = ap.parse_args()

    cdk_names = collections.Counter()  # "module.name" -> connectors
    cdk_names_who = collections.defaultdict(set)
    third = collections.defaultdict(set)
    kinds = collections.Counter()
    bases_count = collections.Counter()
    imported = {}
    out = []
    connectors = sorted(d for d in os.listdir(args.corpus) if os.path.isfile(os.path.join(args.corpus, d, "components.py")))
    support_of = {}
    for name in connectors:
        folder = os.path.join(args.corpus, name)
        with open(os.path.join(folder, "metadata.yaml")) as f:
            support, manifest_only = meta_fields(f.read())
        support_of[name] = support
    connectors.sort(key=lambda c: (support_of[c] != "certified", c))

    out.append(f"# components.py inventory ({len(connectors)} connectors, "
               f"{sum(1 for c in connectors if support_of[c] == 'certified')} certified)\n")
    for name in connectors:
        folder = os.path.join(args.corpus, name)
        with open(os.path.join(folder, "components.py")) as f:
            src = f.read()
        with open(os.path.join(folder, "manifest.yaml")) as f:
            manifest = f.read()
        tree = ast.parse(src)
        imps = collections.defaultdict(list)
        for module, alias, _ in imports_of(tree):
            cls = classify(module)
            if cls == "airbyte_cdk":
                label = f"{module}.{alias}" if alias else module
                imps[cls].append(label)
                if name not in cdk_names_who[label]:
                    cdk_names_who[label].add(name)
                    cdk_names[label] += 1
            else:
                imps[cls].append(module if alias is None else f"{module}.{alias}")
                if cls == "third_party":
                    third[module.split(".")[0]].add(name)
        uses = custom_uses(manifest)
        classes = classes_of(tree)
        out.append(f"## {name} ({support_of[name]}, {len(src.splitlines())} lines)\n")
        if args.compat:
            ok, err = try_import(os.path.abspath(args.compat), os.path.abspath(folder))
            imported[name] = (ok, err)
            out.append(f"Imports under the compat layer: {'yes' if ok else 'NO: ' + err}\n")
        for cls in ("airbyte_cdk", "stdlib", "third_party", "local"):
            if imps[cls]:
                out.append(f"- {cls}: " + ", ".join(f"`{x}`" for x in sorted(set(imps[cls]))))
        out.append("")
        out.append("| class | bases | methods defined | manifest uses (type @ field: path) |")
        out.append("|---|---|---|---|")
        used_by_class = collections.defaultdict(list)
        for class_path, kind, field, path, lineno in uses:
            used_by_class[short_class(class_path)].append((kind, field, path, lineno))
        for cname, bases, methods, lineno, is_dc in classes:
            for b in bases:
                bases_count[b] += 1
            u = used_by_class.pop(cname, [])
            for kind in {k or f"(no type) @ {f}" for k, f, *_ in u}:
                kinds[kind] += 1  # once per class and kind
            where = collections.Counter(f"{k or '?'} @ {f}" for k, f, *_ in u)
            where_s = "; ".join(f"{w} x{n}" if n > 1 else w for w, n in where.items()) or "(not in manifest)"
            out.append(
                f"| {cname}{' (dataclass)' if is_dc else ''} | {', '.join(bases) or '-'} | "
                f"{', '.join(methods) or '-'} | {where_s} |"
            )
        for cname, u in used_by_class.items():
            for kind in {k or f"(no type) @ {f}" for k, f, *_ in u}:
                kinds[kind] += 1
            out.append(f"| {cname} (NOT DEFINED in components.py) | | | {u[0][0]} @ {u[0][1]} |")
        out.append("")

    out.append("# Summary\n")
    out.append("## Custom component kinds used in manifests (distinct classes per kind)\n")
    for k, n in kinds.most_common():
        out.append(f"- {k}: {n}")
    out.append("\n## airbyte_cdk names imported (connectors importing each)\n")
    for label, n in sorted(cdk_names.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"- {n:3} `{label}`")
    out.append("\n## Third-party modules (connectors)\n")
    for mod, who in sorted(third.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"- `{mod}` ({len(who)}): {', '.join(sorted(who))}")
    out.append("\n## Most common base classes\n")
    for b, n in bases_count.most_common(30):
        out.append(f"- {n:3} `{b}`")
    if args.compat:
        ok_all = [c for c in connectors if imported[c][0]]
        cert = [c for c in connectors if support_of[c] == "certified"]
        ok_cert = [c for c in cert if imported[c][0]]
        out.append(
            f"\n## Import under the compat layer\n\n{len(ok_all)} of {len(connectors)} import; "
            f"{len(ok_cert)} of {len(cert)} certified.\n"
        )
        for c in connectors:
            if not imported[c][0]:
                out.append(f"- {c} ({support_of[c]}): {imported[c][1]}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
