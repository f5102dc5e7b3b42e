/* The audit trail (store/audit.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/audit.h"

#include <time.h>

#include "db/db.h"

cq_status cq_store_audit_add(cq_store *s, const cq_audit_entry *e, cq_err *err) {
    return cq_db_run(cq_store_conn(s), "write audit", NULL, err,
                     "INSERT INTO audit(at, actor_kind, actor_id, actor_name, action, kb, target, client) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                     "itittttt", (int64_t)time(NULL), e->actor_kind, e->actor_id, e->actor_name, e->action, e->kb,
                     e->target, e->client);
}

static bool audit_read(cq_db_stmt *st, void *elem) {
    cq_audit_entry *e = elem;
    e->id = cq_db_col_int(st, 0);
    e->at = cq_db_col_int(st, 1);
    cq_db_col_copy(st, 2, e->actor_kind, sizeof e->actor_kind);
    e->actor_id = cq_db_col_int(st, 3);
    cq_db_col_copy(st, 4, e->actor_name, sizeof e->actor_name);
    cq_db_col_copy(st, 5, e->action, sizeof e->action);
    cq_db_col_copy(st, 6, e->kb, sizeof e->kb);
    cq_db_col_copy(st, 7, e->target, sizeof e->target);
    cq_db_col_copy(st, 8, e->client, sizeof e->client);
    return true;
}

cq_status cq_store_audit_list(cq_store *s, int64_t before_id, size_t limit, const char *action, cq_audit_entry **out,
                              size_t *n, cq_err *err) {
    return cq_db_list(cq_store_conn(s), "read audit", sizeof **out, audit_read, NULL, (void **)out, n, err,
                      "SELECT id, at, actor_kind, actor_id, actor_name, action, kb, target, client FROM audit "
                      "WHERE (?1 = 0 OR id < ?1) AND (?2 = '' OR action = ?2) ORDER BY id DESC LIMIT ?3",
                      "iti", before_id, action ? action : "", limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
}
