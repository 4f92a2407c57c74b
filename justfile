# Every task a person runs. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

plugins_dir := "target/plugins"
# Rust connectors built by build-plugins: the demo, the declarative engine (declarative.wasm, which
# runs manifests) and the test plugins the host tests pair with.
plugins := "demo-source test-connector wrong-version hostile broken-connector declarative"
# The Python and JavaScript tools, pinned; setup-guest-tools installs them into project folders.
componentize_py := "target/tools/componentize-py/bin/componentize-py"
componentize_js := "guest-sdk/js/node_modules/.bin/componentize-js"

# List the recipes.
default:
    @just --list

# Build the connectors (WebAssembly components) into target/plugins/<name>.wasm.
build-plugins:
    rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
    cargo build --target wasm32-wasip2 --profile plugin {{ prepend("-p ", plugins) }}
    mkdir -p {{plugins_dir}}
    for p in {{plugins}}; do cp "target/wasm32-wasip2/plugin/${p//-/_}.wasm" "{{plugins_dir}}/$p.wasm"; done
    # A build variant in its own target dir, so the two builds do not undo each other.
    cargo build --target wasm32-wasip2 --profile plugin -p hostile --features panic-spec --target-dir target/variants
    cp target/variants/wasm32-wasip2/plugin/hostile.wasm {{plugins_dir}}/hostile-panic-spec.wasm
    cargo build --target wasm32-wasip2 --profile plugin -p broken-connector --features bad-spec --target-dir target/variants
    cp target/variants/wasm32-wasip2/plugin/broken_connector.wasm {{plugins_dir}}/broken-connector-bad-spec.wasm
    cargo build --target wasm32-wasip2 --profile plugin -p wrong-version --features wrong-types --target-dir target/variants
    cp target/variants/wasm32-wasip2/plugin/wrong_version.wasm {{plugins_dir}}/wrong-types.wasm
    just build-guest-plugins
    @ls -l {{plugins_dir}}

# Their builds are not reproducible (a rebuild changes the sha256, so the host compiles it again),
# so each is rebuilt only when one of its sources changed. Both are built in the
# `partition-config-connector` world (report jobs, resume, pages read in steps, the config fields
# partitions read), as the Rust ones are.
# Build the Python and JavaScript demo connectors, and the components runtime.
build-guest-plugins: setup-guest-tools
    #!/usr/bin/env bash
    set -euo pipefail
    stale() { [[ ! -e $1 ]] || [[ -n $(find "${@:2}" -type f -newer "$1" -not -path '*/node_modules/*' -not -path '*/__pycache__/*' | head -1) ]]; }
    mkdir -p {{plugins_dir}}
    out={{plugins_dir}}/demo-source-py.wasm
    if stale $out wit guest-sdk/python plugins/demo-source-py target/tools/componentize-py/.spec; then
        {{componentize_py}} -d wit -w partition-config-connector componentize -p guest-sdk/python -p plugins/demo-source-py app -o $out
    fi
    # The components runtime: a manifest's components.py runs in it (wit/components).
    out={{plugins_dir}}/components.wasm
    if stale $out wit/components plugins/components-py target/tools/componentize-py/.spec; then
        {{componentize_py}} -d wit/components -w runtime componentize -p plugins/components-py runtime -o $out
    fi
    out={{plugins_dir}}/demo-source-js.wasm
    if stale $out wit guest-sdk/js/src guest-sdk/js/package-lock.json plugins/demo-source-js; then
        {{componentize_js}} plugins/demo-source-js/connector.js --wit wit -n partition-config-connector -d http fetch-event -o $out
    fi

# componentize-py in a virtualenv under target/tools; componentize-js and jco in
# guest-sdk/js/node_modules from the committed lock file. Does nothing when they are there.
# Install the pinned tools that build Python and JavaScript connectors.
setup-guest-tools:
    #!/usr/bin/env bash
    set -euo pipefail
    spec="componentize-py==0.25.1"
    venv=target/tools/componentize-py
    if [[ ! -x $venv/bin/componentize-py || "$(cat "$venv/.spec" 2>/dev/null)" != "$spec" ]]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
        echo "$spec" > "$venv/.spec"
    fi
    lock=$(sha256sum guest-sdk/js/package-lock.json)
    if [[ "$(cat guest-sdk/js/node_modules/.sluice-lock 2>/dev/null)" != "$lock" ]]; then
        npm ci --prefix guest-sdk/js --no-audit --no-fund
        echo "$lock" > guest-sdk/js/node_modules/.sluice-lock
    fi

# Outside a component; Python against the bindings componentize-py generates (for the world with
# every interface, so the report-job glue is there to test).
# Unit tests of the Python and JavaScript SDKs' helpers (pagination, slicing, config fields, jobs), and
# of the custom-components layer (plugins/components-py).
test-guest-sdks: setup-guest-tools
    rm -rf target/tools/py-bindings
    {{componentize_py}} -d wit -w stepped-connector bindings target/tools/py-bindings
    PYTHONPATH=guest-sdk/python:target/tools/py-bindings python3 -m unittest discover -s guest-sdk/python/tests -t guest-sdk/python
    node --test guest-sdk/js/test/
    # The custom-components layer (#27): pure Python, no site-packages, as inside the sandbox.
    python3 -I -m unittest discover -s plugins/components-py/tests -t plugins/components-py/tests

# Build the host and the demo API.
build:
    cargo build --release -p sluice-host -p sluice-tests

# Run the demo connector sandboxed against the bundled demo API and show what it read.
demo records="1000": build-plugins build
    scripts/demo.sh {{records}} target/release

# The platforms' own clients from PyPI, pinned, in virtualenvs under target/tools, for the tests
# that run a packaged connector under them.
setup-platform-clients:
    #!/usr/bin/env bash
    set -euo pipefail
    for spec in "pyairbyte:airbyte==0.71.3" "meltano:meltano==4.4.1"; do
        name=${spec%%:*}; pins=${spec#*:}
        venv=target/tools/$name
        [[ -x $venv/bin/python && "$(cat "$venv/.spec" 2>/dev/null)" == "$pins" ]] && continue
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
        echo "$pins" > "$venv/.spec"
    done

# Real Singer targets from PyPI, each in its own virtualenv (their pins conflict), for the tests.
setup-singer-targets:
    #!/usr/bin/env bash
    set -euo pipefail
    # duckdb is pinned: with newer duckdb, target-duckdb 0.8.0's COPY takes the first row for a header.
    for spec in "target-jsonl==0.1.4" "target-duckdb==0.8.0 duckdb==1.0.0"; do
        name=${spec%%==*}
        venv=target/singer-targets/$name
        [[ -x $venv/bin/$name && "$(cat "$venv/.spec" 2>/dev/null)" == "$spec" ]] && continue
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check $spec
        echo "$spec" > "$venv/.spec"
    done

# The Airbyte CDK from PyPI, pinned, in a virtualenv under target/tools: the differential tests
# run its `source-declarative-manifest` beside Sluice on the same manifests.
setup-cdk:
    #!/usr/bin/env bash
    set -euo pipefail
    # pendulum for the certified connectors whose components.py imports it (the CDK 7 does not).
    spec="airbyte-cdk==7.39.1 pendulum==3.3.0"
    venv=target/tools/airbyte-cdk
    [[ -x $venv/bin/source-declarative-manifest && "$(cat "$venv/.spec" 2>/dev/null)" == "$spec" ]] && exit 0
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check $spec
    echo "$spec" > "$venv/.spec"

# The real connectors the certified-connector tests read (tests/fixtures/certified/*/case.json pins
# each one's wheel on PyPI): their manifest.yaml and components.py, under target/tools/certified.
setup-certified: setup-cdk
    target/tools/airbyte-cdk/bin/python scripts/certified-connectors.py

# moto's S3 server from PyPI, in a virtualenv: the tests start it on loopback for replay storage.
setup-s3-server:
    #!/usr/bin/env bash
    set -euo pipefail
    spec="moto[s3,server]==5.2.5 flask flask-cors"
    venv=target/tools/moto
    [[ -x $venv/bin/moto_server && "$(cat "$venv/.spec" 2>/dev/null)" == "$spec" ]] && exit 0
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check $spec
    echo "$spec" > "$venv/.spec"

# The Prometheus project's Python client from PyPI, pinned, in a virtualenv: its parser reads the
# metrics `--metrics-file` writes in the tests.
setup-metrics-parser:
    #!/usr/bin/env bash
    set -euo pipefail
    spec="prometheus-client==0.26.0"
    venv=target/tools/prometheus
    [[ -x $venv/bin/python && "$(cat "$venv/.spec" 2>/dev/null)" == "$spec" ]] && exit 0
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check $spec
    echo "$spec" > "$venv/.spec"

# Run every test.
test: build-plugins setup-singer-targets setup-s3-server setup-platform-clients setup-cdk setup-certified setup-metrics-parser test-guest-sdks
    @command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest
    cargo nextest run --workspace --exclude demo-source --exclude test-connector --exclude wrong-version --exclude hostile --exclude broken-connector --no-fail-fast
    # nextest does not run doc tests: the embedding guide's example and the crate docs. The same
    # packages as nextest's, so their features and build are the same (one package alone unifies
    # features differently and rebuilds wasmtime: minutes on 2 cores).
    cargo test --doc --workspace --exclude demo-source --exclude test-connector --exclude wrong-version --exclude hostile --exclude broken-connector

# One fuzz target of host/src/fuzz/targets.rs for longer (`just test` runs each for 6 s):
# manifest_yaml, state_file, catalog, config_against_spec, records_split, streamed_lines,
# page_tokens, guest_records. SLUICE_FUZZ_SEED repeats a run; SLUICE_FUZZ_INPUT=FILE runs one input.
# Fuzz one parser of untrusted input for SECONDS (docs/sandbox.md, "Fuzzing").
fuzz target seconds="300":
    SLUICE_FUZZ_SECS={{seconds}} cargo nextest run -p sluice-host --lib --no-capture -E 'test(=fuzz::targets::{{target}})'

# Benchmarks: the host against a native reader, same run, ratios.
bench: build-plugins setup-cdk
    cargo build --release -p sluice-host
    cargo bench -p sluice-host --bench throughput
    cargo bench -p sluice-host --bench languages
    just bench-figures

# Copy the reports `just bench` wrote (docs/bench/) into the docs' blocks that include them.
bench-figures:
    python3 scripts/bench-figures.py --write

# Formatting and lints, warnings as errors; in the host, no files that import each other and no function over 100 lines
# (in the declarative engine, no function over 100 lines); the docs' bench figures as the bench wrote them.
lint:
    cargo fmt --all -- --check
    python3 scripts/tree-check.py host/src
    python3 scripts/tree-check.py --functions-only plugins/declarative/src
    python3 scripts/bench-figures.py
    cargo clippy --workspace --exclude demo-source --exclude test-connector --exclude wrong-version --exclude hostile --exclude broken-connector --all-targets -- -D warnings
    cargo clippy --target wasm32-wasip2 {{ prepend("-p ", plugins) }} -- -D warnings
    # The test plugins' variants, as `build-plugins` builds them (in their own target dir).
    cargo clippy --target wasm32-wasip2 --target-dir target/variants -p hostile -p broken-connector -p wrong-version --features hostile/panic-spec,broken-connector/bad-spec,wrong-version/wrong-types -- -D warnings
