#!/usr/bin/env python3
"""Fetch the real connectors the certified-connector tests read (tests/e2e/certified.rs).

Each folder tests/fixtures/certified/NAME/ has a case.json whose `package` pins the connector's
wheel on PyPI (airbyte-source-NAME==VERSION, the package Airbyte published of it). This downloads
each wheel (pip, no dependencies) into target/tools/certified/NAME/ and writes there the
connector as Airbyte's manifest-only packaging has it: manifest.yaml, with the package's spec
(spec.json or spec.yaml) as its `spec` when it has none, and its classes named
`source_declarative_manifest.components.X`; and components.py as it is. Nothing of them is
committed here. Idempotent: a folder whose .spec names the pinned package is left as it is.

A connector published before Airbyte made it manifest-only may keep its custom classes in modules
of a package (source_jira/components/extractors.py, ...) rather than in one components.py: the
case's `components` lists those modules (paths in the package, in order) and they are joined into
one components.py as Airbyte's manifest-only migration joined them: imports of the package's own
modules dropped (their names are all in the one file then), `from __future__` imports first, and
the manifest's class names (MODULE.components.extractors.X) become
source_declarative_manifest.components.X. The case's `rewrite` (`{"old text": "new text"}`) then
changes the components.py as that migration changed it for the CDK 7 the tests run (source-klaviyo
2.13.1, built for CDK 6, imports DeclarativeStream from a module CDK 7 no longer has).

Run with the CDK's Python (`just setup-certified`), which has PyYAML.
"""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import yaml

CASES = pathlib.Path("tests/fixtures/certified")
OUT = pathlib.Path("target/tools/certified")


def member(z: zipfile.ZipFile, module: str, name: str):
    path = f"{module}/{name}"
    return z.read(path) if path in z.namelist() else None


def joined(module: str, sources: list) -> bytes:
    """The package's modules as one components.py (see the module's doc)."""
    future, body = [], []
    own = re.compile(rf"^(from\s+(\.|{module}\b)[\w.]*\s+import\s+(\([^)]*\)|.*)|import\s+{module}\b.*)$", re.M)
    for source in sources:
        text = own.sub("", source.decode())
        for line in text.splitlines():
            (future if line.startswith("from __future__") else body).append(line)
    return "\n".join(sorted(set(future)) + body).encode() + b"\n"


def resolved(manifest: dict, node):
    """A node with its `$ref`s (or a "#/..." reference) merged in, its own fields winning, as the CDK merges them."""
    if isinstance(node, str) and node.startswith("#/"):
        node = {"$ref": node}
    while isinstance(node, dict) and "$ref" in node:
        target = manifest
        for key in node["$ref"].removeprefix("#/").split("/"):
            target = target[key]
        node = {**resolved(manifest, target), **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def inline_schemas(manifest: dict, module: str, z: zipfile.ZipFile) -> None:
    """Streams whose schema_loader is a JsonFileSchemaLoader of the package's schemas/NAME.json (a
    file outside the manifest, which the CDK finds only in the installed package) read it as
    Airbyte's manifest-only migration wrote them: an InlineSchemaLoader of `#/schemas/NAME`, the
    file under the manifest's `schemas`."""
    for entry in manifest.get("streams", []):
        stream = resolved(manifest, entry)
        loader = resolved(manifest, stream.get("schema_loader"))
        if not isinstance(loader, dict) or loader.get("type") != "JsonFileSchemaLoader":
            continue
        name = stream.get("name") or stream.get("$parameters", {}).get("name")
        path = re.sub(r"\{\{\s*parameters(\['name'\]|\.name)\s*\}\}", str(name), loader.get("file_path", ""))
        schema = member(z, module, path.removeprefix("./").removeprefix(f"{module}/"))
        if name is None or schema is None:
            continue
        target = entry  # the stream's own node (a "#/definitions/..." entry: the definition)
        if isinstance(entry, str):
            target = manifest
            for key in entry.removeprefix("#/").split("/"):
                target = target[key]
        target["schema_loader"] = {"type": "InlineSchemaLoader", "schema": {"$ref": f"#/schemas/{name}"}}
        manifest.setdefault("schemas", {})[name] = json.loads(schema)


def fetch(name: str, case: dict) -> None:
    dest = OUT / name
    spec_file = dest / ".spec"
    pinned = case["package"] + "".join(f" {path}" for path in case.get("components", []))
    pinned += "".join(f" {old!r}->{new!r}" for old, new in case.get("rewrite", {}).items())
    if spec_file.exists() and spec_file.read_text() == pinned:
        return
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    subprocess.run(pip + ["-d", str(dest), case["package"]], check=True)
    wheel = next(dest.glob("*.whl"))
    module = case["module"]
    with zipfile.ZipFile(wheel) as z:
        manifest = yaml.safe_load(member(z, module, "manifest.yaml"))
        components = member(z, module, "components.py")
        if "components" in case:
            components = joined(module, [member(z, module, path) for path in case["components"]])
        for old, new in case.get("rewrite", {}).items():
            if components is None or old.encode() not in components:
                sys.exit(f"{wheel.name}: its components have no {old!r} to rewrite")
            components = components.replace(old.encode(), new.encode())
        spec = member(z, module, "spec.json") or member(z, module, "spec.yaml")
        inline_schemas(manifest, module, z)
    if "spec" not in manifest:
        if spec is None:
            sys.exit(f"{wheel.name}: the manifest has no spec and the package no spec.json or spec.yaml")
        spec = yaml.safe_load(spec)
        manifest["spec"] = {
            "type": "Spec",
            "documentation_url": spec.get("documentationUrl", ""),
            "connection_specification": spec["connectionSpecification"],
        }
    # One line per scalar (no folding), so a case can name a URL as the manifest has it.
    text = yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=float("inf"))
    text = text.replace(f"{module}.components.", "source_declarative_manifest.components.")
    # Classes in modules of the package (MODULE.components.extractors.X, MODULE.utils.X).
    text = re.sub(rf"\b{module}\.(?:[a-z_0-9]+\.)*([A-Z]\w*)", r"source_declarative_manifest.components.\1", text)
    text = re.sub(r"source_declarative_manifest\.components\.(?:[a-z_0-9]+\.)+([A-Z]\w*)", r"source_declarative_manifest.components.\1", text)
    (dest / "manifest.yaml").write_text(text)
    if components is not None:
        (dest / "components.py").write_bytes(components)
    wheel.unlink()
    spec_file.write_text(pinned)


def main() -> None:
    for case in sorted(CASES.glob("*/case.json")):
        fetch(case.parent.name, json.loads(case.read_text()))


if __name__ == "__main__":
    main()
