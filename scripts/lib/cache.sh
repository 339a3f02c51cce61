# Shared by the install scripts in scripts/ (sourced, not run): the steps
# every cached install repeats. The sourcing script defines `log` (and, for
# venv_install, `die`).

# An exclusive lock on FILE for the rest of this process (no-op without
# flock), so two concurrent installs into one cache do not interleave.
cache_lock() {
    local file=$1
    mkdir -p "$(dirname "$file")"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$file"
        if ! flock -n 9; then
            log "waiting for lock ${file}"
            flock 9
        fi
    fi
}

# A fresh virtualenv at DIR (any old one removed) with PACKAGES installed
# from PyPI, by $PYTHON (default python3).
pip_venv() {
    local dir=$1
    shift
    rm -rf "$dir"
    "${PYTHON:-python3}" -m venv "$dir"
    "${dir}/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
}

# Whether the venv at ${PREFIX}/venv is complete: its STAMP file holds
# STAMP_CONTENT (the pins) and its python runs. A script whose install
# needs more (an import) checks that after this.
venv_stamped() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_CONTENT" ] \
        && [ -x "${PREFIX}/venv/bin/python" ]
}

# Install PACKAGES (pinned `name==version` specs) into ${PREFIX}/venv once,
# idempotent: nothing when the sourcing script's `is_installed` holds;
# otherwise, under the cache lock (and checked again there: another process
# may have finished it meanwhile), a fresh venv, then the STAMP_CONTENT
# stamp, then `is_installed` must hold. Reads PREFIX, STAMP, STAMP_CONTENT
# and PYTHON.
venv_install() {
    if is_installed; then
        log "found in the cache: ${PREFIX}"
        return 0
    fi
    command -v "${PYTHON:-python3}" >/dev/null 2>&1 || die "${PYTHON:-python3} not found"
    cache_lock "${PREFIX}/.lock"
    if is_installed; then return 0; fi
    rm -f "$STAMP"
    log "venv + pip install $*"
    pip_venv "${PREFIX}/venv" "$@"
    printf '%s' "$STAMP_CONTENT" >"$STAMP"
    is_installed || die "install finished but the venv in ${PREFIX} fails its check"
    log "installed into ${PREFIX}"
}
