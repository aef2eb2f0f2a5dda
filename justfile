# Recipes for the deterministic simulation harness. Every recipe is one cargo command (or a loop
# of them): machines without `just` run the same lines by hand. See README.md.

# List the recipes.
default:
    @just --list

# Every test: unit, scripted (trace snapshots), generated, regressions, determinism.
test:
    cargo test --workspace

# Hunt for a violation, e.g. `just hunt --bug no_call_deadline` (exit 1 when one is found).
hunt *ARGS:
    cargo run --release -p harness -- hunt {{ARGS}}

# Rerun a token (or a scenario JSON file) exactly, shrink it, print the trace.
replay TOKEN *ARGS:
    cargo run --release -p harness -- replay {{TOKEN}} {{ARGS}}

# Throughput, acceleration, overhead against bare turmoil, cases-to-detect per switch
# (writes target/bench.json). Release build.
bench *ARGS:
    cargo run --release -p harness -- bench {{ARGS}}

# One shard of a hunt spread over machines, e.g. `just hunt-shard 2 8` (see .ci/shard).
hunt-shard INDEX COUNT *CASES:
    bash .ci/shard hunt {{INDEX}} {{COUNT}} {{CASES}}

# Before a release: per family, SEEDS clean hunts of CASES cases on fresh seeds (exit 1 if found).
soak SEEDS="20" CASES="2000":
    bash .ci/soak {{SEEDS}} {{CASES}}

# The families and their bug switches.
list:
    cargo run --release -p harness -- list

# Review changed trace snapshots in snapshots/ (needs cargo-insta: `just install-tools`).
review:
    cargo insta review --workspace

# Hunt with each bug switch on: every one must be found (exit 1) within 256 cases of seed 1.
regressions:
    @set -eu; bugs=$(cargo run -q --release -p harness -- list | cut -d: -f2); test -n "$bugs"; for bug in $bugs; do rc=0; cargo run -q --release -p harness -- hunt --bug "$bug" --cases 256 --seed 1 2>/dev/null || rc=$?; if [ "$rc" -ne 1 ]; then echo "regression NOT found: $bug (exit $rc)"; exit 1; fi; echo "found: $bug"; done

# Install cargo-insta (for `just review`) if it is missing.
install-tools:
    @cargo insta --version >/dev/null 2>&1 || cargo install cargo-insta --locked

# Lints, warnings denied (clippy.toml holds the determinism rules).
clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# Mutation testing of a family's core with cargo-mutants (installed once if missing), e.g.
# `just mutants relay --shard 0/4`; the score is in target/mutants-<family>/mutants.out.
mutants FAMILY *ARGS:
    bash .ci/mutants {{FAMILY}} {{ARGS}}
