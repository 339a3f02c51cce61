#!/usr/bin/env bash
# The brief's dependency rule, checked: pikuri's runtime dependencies are
# ureq, serde, serde_json, crossbeam-channel, parking_lot and log, and no
# proc-macro crate comes in through pikuri itself (serde without `derive`:
# the crate's serde impls are `macro_rules!`, src/serde_macros.rs). A
# feature may switch on a feature of one of the six; what such a feature
# brings is that crate's (ureq's `charset` pulls encoding_rs, whose build
# uses two small proc macros), so proc macros are allowed only inside
# ureq's own tree. Dev-dependencies are not looked at.
# Exit 1 with the offending line on any breach.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
tree() { cargo tree -q -e normal,build --prefix none "$@"; }
for features in "--no-default-features" "" "--all-features"; do
  # shellcheck disable=SC2086
  direct=$(cargo tree -q -e normal --depth 1 --prefix none $features |
    tail -n +2 | awk '{print $1}' | sort -u | tr '\n' ' ')
  for dep in $direct; do
    case $dep in
      ureq | serde | serde_json | crossbeam-channel | parking_lot | log) ;;
      *) echo "check-dependencies: pikuri ${features:-(default features)} depends on $dep" >&2; fail=1 ;;
    esac
  done
  # shellcheck disable=SC2086
  macros=$(tree $features | grep '(proc-macro)' | awk '{print $1}' | sort -u || true)
  for m in $macros; do
    # Why the inverted tree: it shows the path by which the macro comes in.
    # shellcheck disable=SC2086
    if ! tree $features -i "$m" | grep -q '^ureq v'; then
      echo "check-dependencies: proc-macro crate $m in pikuri ${features:-(default features)}, not through ureq" >&2
      fail=1
    fi
  done
  if [ "$features" = "--no-default-features" ] && [ -n "$macros" ]; then
    echo "check-dependencies: the core (no default features) compiles proc macros: $macros" >&2
    fail=1
  fi
done

# A program that declares typed tool arguments with `schema_type!` needs
# pikuri alone: no serde, no serde_json, no proc macro (the macro writes
# the serde impls through pikuri's hidden `__private`). Checked by building
# such a program (its target dir kept, so a second run checks only pikuri).
user=$(mktemp -d)
trap 'rm -rf "$user"' EXIT
mkdir "$user/src"
cp Cargo.lock "$user/"
cat >"$user/Cargo.toml" <<EOF
[package]
name = "schema-type-user"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
pikuri = { path = "$(pwd)", default-features = false }

[workspace]
EOF
cat >"$user/src/main.rs" <<'EOF'
pikuri::tool::schema_type! {
    /// A unit.
    enum Unit { Celsius = "celsius", Kelvin }
}
pikuri::tool::schema_type! {
    /// Where and how.
    struct Weather { city: String, days: Option<u8>, unit: Unit, r#type: Vec<Unit> }
}
fn main() {
    let tool = pikuri::tool::TypedTool::new("w", "Weather.", |w: Weather, _: &pikuri::ToolContext| {
        Ok(format!("{} {:?} {:?} {:?}", w.city, w.days, w.unit, w.r#type))
    });
    let _ = (tool, <Weather as pikuri::tool::JsonSchema>::json_schema());
}
EOF
if ! CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$(pwd)/target/schema-type-user} \
  cargo check -q --manifest-path "$user/Cargo.toml" 2>"$user/errors"; then
  head -20 "$user/errors" >&2
  echo "check-dependencies: a crate that uses schema_type! does not build with pikuri alone" >&2
  fail=1
elif cargo tree -q -e normal,build --prefix none --manifest-path "$user/Cargo.toml" | grep -q '(proc-macro)'; then
  echo "check-dependencies: a crate that uses schema_type! compiles a proc macro" >&2
  fail=1
fi

[ $fail = 0 ] && echo "check-dependencies: the six, no proc macro of pikuri's own; schema_type! needs pikuri alone"
exit $fail
