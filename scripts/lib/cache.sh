# Shared by the install scripts in scripts/ (sourced, not run): the two
# steps every cached install repeats. The sourcing script defines `log`.

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
