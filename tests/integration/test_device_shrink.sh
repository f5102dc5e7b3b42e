#!/usr/bin/env bash
# tools/device_model.sh shrink / unshrink (the tree that travels with every device call made small for a window):
# the big tracked files leave the index but stay on disk and stop travelling, unshrink puts exactly them back, the
# user's own exclude lines survive, and shrinking twice, unshrinking when nothing is shrunk or shrinking over staged
# changes is refused and changes nothing.
# usage: test_device_shrink.sh [path/to/clauseqa (unused)]
set -euo pipefail
source "$(dirname "$0")/checks.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
r=$work/repo
mkdir -p "$r/tools" "$r/data/models/x" "$r/docs"
cp "$ROOT/tools/device_model.sh" "$r/tools/"
head -c 400000 /dev/urandom > "$r/data/models/x/big weights.safetensors" # a space in the name
head -c 350000 /dev/urandom > "$r/big.bin"                                # at the top: anchored in exclude
echo small > "$r/docs/small.md"
cd "$r"
git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -q -m init
echo "my-own-pattern" >> .git/info/exclude
before=$(bash tools/device_model.sh tree)
bash tools/device_model.sh shrink > "$work/out"
after=$(bash tools/device_model.sh tree)
check "shrink: the tree travels lighter ($before -> $after)" test "$after" -lt $((before - 700000))
check "shrink: the files stay on disk" test -f "data/models/x/big weights.safetensors" -a -f big.bin
check "shrink: git sees no untracked file" test -z "$(git status --porcelain --untracked-files=all | grep '^??' || true)"
check "shrink: small files still travel" has "docs/small.md" <(git ls-files)
if bash tools/device_model.sh shrink 2> "$work/err"; then check "shrink twice refused" false; fi
check "shrink twice says so" has "already shrunk" "$work/err"
bash tools/device_model.sh unshrink > "$work/out"
check "unshrink: the index is HEAD again" test -z "$(git status --porcelain --untracked-files=all)"
check "unshrink: the tree as before" test "$(bash tools/device_model.sh tree)" = "$before"
check "unshrink: the user's exclude line kept" has "my-own-pattern" .git/info/exclude
check "unshrink: no shrink line left" test "$(grep -c 'big' .git/info/exclude || true)" = 0
if bash tools/device_model.sh unshrink 2> "$work/err"; then check "unshrink with nothing shrunk refused" false; fi
check "unshrink with nothing shrunk says so" has "nothing shrunk" "$work/err"
echo changed > docs/small.md && git add docs/small.md
if bash tools/device_model.sh shrink 2> "$work/err"; then check "shrink over staged changes refused" false; fi
check "shrink over staged changes says so" has "staged changes" "$work/err"
check "...and changed nothing" test "$(git diff --cached --name-only)" = "docs/small.md"
finish
