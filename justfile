# Every task a person runs. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

plugins_dir := "target/plugins"
# Rust connectors built by build-plugins: the demo and the test plugins the host tests pair with.
plugins := "demo-source test-connector wrong-version hostile"

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
    @ls -l {{plugins_dir}}

# Build the host and the demo API.
build:
    cargo build --release -p sluice-host -p sluice-tests

# Run the demo connector sandboxed against the bundled demo API and show what it read.
demo records="1000": build-plugins build
    scripts/demo.sh {{records}} target/release

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

# Run every test.
test: build-plugins setup-singer-targets
    @command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest
    cargo nextest run --workspace --exclude demo-source --exclude test-connector --exclude wrong-version --exclude hostile --no-fail-fast

# Benchmarks: the host against a native reader, same run, ratios.
bench: build-plugins
    cargo build --release -p sluice-host
    cargo bench -p sluice-host --bench throughput

# Formatting and lints, warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --exclude demo-source --exclude test-connector --exclude wrong-version --exclude hostile --all-targets -- -D warnings
    cargo clippy --target wasm32-wasip2 {{ prepend("-p ", plugins) }} -- -D warnings
