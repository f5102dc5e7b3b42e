#!/usr/bin/env bash
# Accounts on the command line (issue 30): `keys create` with several --kb (it kept only the last one), and
# `user add | list | passwd | set | remove` — the password from standard input only, and every refusal (empty or
# short password, a name taken, a missing KB, a bad role) says why and changes nothing.
# usage: test_cli_users.sh path/to/clauseqa
set -euo pipefail
source "$(dirname "$0")/checks.sh"
cli_work "$1"

cq kb create laws 2> /dev/null
cq kb create 合同 2> /dev/null

# --- a key of several KBs ---
cq keys create --role editor --kb laws --kb 合同 --json > "$work/key" 2> "$work/err"
check "keys create --kb A --kb B keeps both" test "$(json 'd["kbs"]' < "$work/key")" = "['laws', '合同']"
check "both granted in the store" test "$(db "SELECT count(*) FROM kb_grants WHERE subject = 'key'")" = 2
cq keys list --json > "$work/out"
check "keys list shows both" test "$(json 'd["keys"][0]["kbs"]' < "$work/out")" = "['laws', '合同']"
if cq keys create --role reader --kb laws --kb missing 2> "$work/err"; then check "a missing KB refused" false; fi
check "a missing KB is named" has "no knowledge base named 'missing'" "$work/err"
check "nothing made" test "$(db "SELECT count(*) FROM api_keys")" = 1

# --- users ---
printf 'correct horse\n' | cq user add alice --role editor --kb laws --kb 合同 2> "$work/err"
check "user add" has "user alice added (editor of laws,合同)" "$work/err"
check "only an argon2id hash" test "$(db "SELECT count(*) FROM users WHERE password_hash LIKE '\$argon2id\$%' AND password_hash NOT LIKE '%horse%'")" = 1
printf 'reader password\n' | cq user add 王芳 --kb '*' 2> "$work/err"
check "the role defaults to reader" test "$(db "SELECT role || ' ' || kb FROM users WHERE name = '王芳'")" = "reader *"
printf 'an admin password\n' | cq user add root --role admin 2> "$work/err"

refused() { # refused NAME EXPECTED-MESSAGE COMMAND... (reads stdin)
  local name=$1 want=$2
  shift 2
  local before
  before=$(db "SELECT count(*) || '/' || (SELECT count(*) FROM kb_grants) || '/' || group_concat(password_hash) FROM users")
  if "$@" > "$work/out" 2> "$work/err"; then check "$name: refused" false; return; fi
  check "$name: says '$want'" has "$want" "$work/err"
  check "$name: nothing changed" test "$(db "SELECT count(*) || '/' || (SELECT count(*) FROM kb_grants) || '/' || group_concat(password_hash) FROM users")" = "$before"
}
printf '\n' | refused "empty password" "the password is empty" cq user add bob --kb laws
printf 'short\n' | refused "short password" "the password is too short: at least 8 characters" cq user add bob --kb laws
refused "no password at all" "give the password on standard input" cq user add bob --kb laws < /dev/null
printf 'correct horse\n' | refused "a name taken" "a user named 'alice' exists already" cq user add alice --kb laws
printf 'correct horse\n' | refused "a missing KB" "no knowledge base named 'missing'" cq user add bob --kb laws --kb missing
printf 'correct horse\n' | refused "a bad role" "--role must be admin, editor or reader" cq user add bob --role boss --kb laws
printf 'correct horse\n' | refused "a reader without KB" "needs a KB" cq user add bob
printf 'correct horse\n' | refused "an admin with a KB" "give no KB" cq user add bob --role admin --kb laws
printf 'correct horse\n' | refused "a bad name" "invalid user name" cq user add "bo b" --kb laws
refused "the password on the command line" "takes no name" cq user list secret-password
printf 'new password\n' | refused "passwd of nobody" "no user named 'nobody'" cq user passwd nobody
printf 'short\n' | refused "passwd too short" "too short" cq user passwd alice
refused "remove nobody" "no user named 'nobody'" cq user remove nobody
refused "set to a missing KB" "no knowledge base named 'gone'" cq user set alice --role reader --kb gone

cq user list --json > "$work/out"
check "user list" test "$(json '[(u["name"], u["role"], u["kbs"]) for u in d["users"]]' < "$work/out")" = \
  "[('alice', 'editor', ['laws', '合同']), ('王芳', 'reader', '*'), ('root', 'admin', None)]"
cq user list > "$work/out"
check "user list as text" has "alice" "$work/out"
check "no hash in the list" test "$(grep -c argon2 "$work/out" || true)" = 0

old=$(db "SELECT password_hash FROM users WHERE name = 'alice'")
printf 'a new password\n' | cq user passwd alice 2> "$work/err"
check "passwd" has "password of alice changed" "$work/err"
check "passwd stores a new hash" test "$(db "SELECT password_hash FROM users WHERE name = 'alice'")" != "$old"
cq user set alice --role reader --kb laws 2> "$work/err"
check "set" test "$(db "SELECT role || ' ' || kb FROM users WHERE name = 'alice'")" = "reader laws"
check "set replaces the grant" test "$(db "SELECT count(*) FROM kb_grants WHERE subject = 'user'")" = 1
cq user remove 王芳 2> "$work/err"
check "remove" test "$(db "SELECT count(*) FROM users WHERE name = '王芳'")" = 0
check "the trail: every change, by the system user, nothing for the refusals" test \
  "$(db "SELECT group_concat(action || ':' || target, '|') FROM (SELECT action, target FROM audit WHERE actor_kind = 'cli' AND actor_name <> '' ORDER BY id)")" = \
  "key_create:key 1 editor (editor)|user_add:user alice (editor)|user_add:user 王芳 (reader)|user_add:user root (admin)|user_passwd:user alice|user_set:user alice (reader)|user_remove:user 王芳"
check "a user turns authentication on" test "$(db "SELECT value FROM settings WHERE name = 'auth_required'")" = 1
finish
