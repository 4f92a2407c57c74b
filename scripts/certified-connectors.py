#!/usr/bin/env python3
"""Fetch the real connectors the certified-connector tests read (tests/e2e/certified.rs).

Each folder tests/fixtures/certified/NAME/ has a case.json whose `package` pins the connector's
wheel on PyPI (airbyte-source-NAME==VERSION, the package Airbyte published of it). This downloads
each wheel (pip, no dependencies) into target/tools/certified/NAME/ and writes there the
connector as Airbyte's manifest-only packaging has it: manifest.yaml, with the package's spec
(spec.json or spec.yaml) as its `spec` when it has none, and its classes named
`source_declarative_manifest.components.X`; and components.py as it is. Nothing of them is
committed here. Idempotent: a folder whose .spec names the pinned package is left as it is.

Run with the CDK's Python (`just setup-certified`), which has PyYAML.
"""

import json
import pathlib
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


def fetch(name: str, case: dict) -> None:
    dest = OUT / name
    spec_file = dest / ".spec"
    if spec_file.exists() and spec_file.read_text() == case["package"]:
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
        spec = member(z, module, "spec.json") or member(z, module, "spec.yaml")
    if "spec" not in manifest:
        if spec is None:
            sys.exit(f"{wheel.name}: the manifest has no spec and the package no spec.json or spec.yaml")
        spec = yaml.safe_load(spec)
        manifest["spec"] = {
            "type": "Spec",
            "documentation_url": spec.get("documentationUrl", ""),
            "connection_specification": spec["connectionSpecification"],
        }
    text = yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True)
    (dest / "manifest.yaml").write_text(text.replace(f"{module}.components.", "source_declarative_manifest.components."))
    if components is not None:
        (dest / "components.py").write_bytes(components)
    wheel.unlink()
    spec_file.write_text(case["package"])


def main() -> None:
    for case in sorted(CASES.glob("*/case.json")):
        fetch(case.parent.name, json.loads(case.read_text()))


if __name__ == "__main__":
    main()
