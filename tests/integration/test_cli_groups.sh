#!/usr/bin/env bash
# Groups on the command line (issue 30): `group add | list | show | set | remove | member add|remove`, and
# `user disable | enable`; a member's sign-in carries the group's role and KBs (own ∪ groups', the highest role);
# every refusal says why and changes nothing; every change is in the audit trail.
# usage: test_cli_groups.sh path/to/clauseqa
set -euo pipefail
source "$(dirname "$0")/checks.sh"
cli_work "$1"

cq kb create laws 2> /dev/null
cq kb create 合同 2> /dev/null
printf 'correct horse\n' | cq user add alice --role reader --kb laws 2> /dev/null

cq group add lawyers --role editor --kb laws --kb 合同 2> "$work/err"
check "group add" has "group lawyers added (editor of laws,合同)" "$work/err"
cq group add 人事 --kb '*' --json > "$work/out" 2> /dev/null
check "group add --json; role defaults to reader" test "$(json 'd["role"] + " " + d["kbs"]' < "$work/out")" = "reader *"

refused() { # refused NAME EXPECTED-MESSAGE COMMAND...
  local name=$1 want=$2
  shift 2
  local before
  before=$(db "SELECT (SELECT count(*) FROM groups) || '/' || (SELECT count(*) FROM group_members) || '/' || (SELECT count(*) FROM kb_grants) || '/' || (SELECT group_concat(role || coalesce(kb, '')) FROM groups)")
  if "$@" > "$work/out" 2> "$work/err"; then check "$name: refused" false; return; fi
  check "$name: says '$want'" has "$want" "$work/err"
  check "$name: nothing changed" test "$(db "SELECT (SELECT count(*) FROM groups) || '/' || (SELECT count(*) FROM group_members) || '/' || (SELECT count(*) FROM kb_grants) || '/' || (SELECT group_concat(role || coalesce(kb, '')) FROM groups)")" = "$before"
}
refused "a name taken" "a group named 'lawyers' exists already" cq group add lawyers --kb laws
refused "a missing KB" "no knowledge base named 'missing'" cq group add g2 --kb missing
refused "a bad role" "--role must be admin, editor or reader" cq group add g2 --role boss --kb laws
refused "an admin with a KB" "give no KB" cq group add g2 --role admin --kb laws
refused "a bad name" "invalid group name" cq group add "g 2" --kb laws
refused "member of no group" "no group named 'nogroup'" cq group member add nogroup alice
refused "member nobody" "no user named 'nobody'" cq group member add lawyers nobody
refused "member: a bad verb" "say add or remove" cq group member put lawyers alice
refused "set a missing group" "no group named 'nogroup'" cq group set nogroup --role reader --kb laws
refused "remove a missing group" "no group named 'nogroup'" cq group remove nogroup

cq group member add lawyers alice 2> "$work/err"
check "member add" has "alice is now in group lawyers" "$work/err"
refused "member twice" "alice is in group 'lawyers' already" cq group member add lawyers alice
cq group list --json > "$work/out"
check "list: members counted" test "$(json '[(g["name"], g["members"]) for g in d["groups"]]' < "$work/out")" = "[('lawyers', 1), ('人事', 0)]"
cq group show lawyers > "$work/out"
check "show: its members" has "  alice" "$work/out"
cq group set 人事 --role reader --kb 合同 2> /dev/null
check "set" test "$(db "SELECT role || ' ' || kb FROM groups WHERE name = '人事'")" = "reader 合同"

cq user disable alice 2> "$work/err"
check "disable" test "$(db "SELECT disabled_at IS NOT NULL FROM users WHERE name = 'alice'")" = 1
cq user list --json > "$work/out"
check "list: disabled" test "$(json 'd["users"][0]["disabled"]' < "$work/out")" = True
cq user enable alice 2> "$work/err"
check "enable" test "$(db "SELECT disabled_at IS NULL FROM users WHERE name = 'alice'")" = 1

cq group member remove lawyers alice 2> "$work/err"
check "member remove" has "alice is no longer in group lawyers" "$work/err"
refused "member remove again" "alice is not in group 'lawyers'" cq group member remove lawyers alice
cq group remove lawyers 2> "$work/err"
check "remove" test "$(db "SELECT count(*) FROM groups WHERE name = 'lawyers'")" = 0
check "its grants gone" test "$(db "SELECT count(*) FROM kb_grants WHERE subject = 'group'")" = 1
check "the trail" test \
  "$(db "SELECT group_concat(action || ':' || target, '|') FROM (SELECT action, target FROM audit WHERE actor_kind = 'cli' AND action LIKE 'group%' OR action LIKE 'user_%able' ORDER BY id)")" = \
  "group_add:group lawyers (editor)|group_add:group 人事 (reader)|group_member_add:group lawyers: user alice|group_set:group 人事 (reader)|user_disable:user alice|user_enable:user alice|group_member_remove:group lawyers: user alice|group_remove:group lawyers"
finish
