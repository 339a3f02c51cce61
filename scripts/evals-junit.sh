#!/usr/bin/env bash
# The evals kit in CI (issue 41): run examples/evals (the ten-case eval
# replayed from its recording) against its committed baseline, and have a
# real JUnit consumer from PyPI read its JUnit XML and the hostile report
# of the integration tests.
#
# Everything comes from PyPI only, pinned below:
#   * junitparser  (reads JUnit/xUnit XML, as CI plugins do)
#
# Usage:
#   scripts/evals-junit.sh install   create the venv in the cache and pip install it (idempotent)
#   scripts/evals-junit.sh test      install, run the example (exit 1 on a regression), check
#                                    its JUnit XML with junitparser against baseline.json, and run
#                                    the integration test `evals::junit` with PIKURI_JUNIT_PYTHON set
#
# Environment:
#   PIKURI_CACHE   cache root (default: $HOME/.cache/pikuri)
#   PYTHON         python used for the venv (default: python3)
#
# All diagnostics go to stderr.

set -euo pipefail
# venv_stamped, venv_install (and cache_lock, pip_venv under them)
source "$(dirname "$0")/lib/cache.sh"

readonly JUNITPARSER_VERSION="5.0.3"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/junitparser-${JUNITPARSER_VERSION}"
STAMP="${PREFIX}/.installed"
STAMP_CONTENT="junitparser=${JUNITPARSER_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { printf '[evals-junit.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

is_installed() { venv_stamped; }

cmd_install() {
    venv_install "junitparser==${JUNITPARSER_VERSION}"
}

cmd_test() {
    cmd_install
    cd "$(dirname "$0")/.."
    local py="${PREFIX}/venv/bin/python"
    out=$(mktemp -d)
    trap 'rm -rf "${out:-}"' EXIT
    # Exit 1 when a case regressed against examples/evals/baseline.json.
    cargo run --example evals -- --junit "$out/evals.xml"
    "$py" - "$out/evals.xml" examples/evals/baseline.json <<'PY'
import json, sys
from junitparser import JUnitXml, Failure, Error
xml = JUnitXml.fromfile(sys.argv[1])
baseline = json.load(open(sys.argv[2]))
suites = list(xml)
assert len(suites) == 1, suites
suite = suites[0]
assert suite.name == baseline["dataset"], (suite.name, baseline["dataset"])
cases = {c.name: c for c in suite}
want = {c["name"]: c["pass_rate"] for c in baseline["cases"]}
assert set(cases) == set(want), (sorted(cases), sorted(want))
for name, rate in want.items():
    failed = any(isinstance(r, (Failure, Error)) for r in cases[name].result)
    assert failed == (rate < 1.0), (name, rate, cases[name].result)
assert suite.tests == len(want) and suite.failures == sum(r < 1.0 for r in want.values()), (suite.tests, suite.failures)
print(f"junitparser: {suite.tests} test cases, {suite.failures} failures, as in the baseline")
PY
    # PIKURI_REQUIRE_JUNIT=1: the hostile-name test must find junitparser.
    PIKURI_JUNIT_PYTHON="$py" PIKURI_REQUIRE_JUNIT=1 \
        cargo test --test integration evals::junit
}

case "${1:-}" in
    install) cmd_install ;;
    test) cmd_test ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
esac
