/* The audit trail (store/audit.h), written once for SQLite and PostgreSQL on db/db.h. */
#include "store/audit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/grow.h"
#include "db/db.h"

cq_status cq_store_audit_add(cq_store *s, const cq_audit_entry *e, cq_err *err) {
    return cq_db_run(cq_store_conn(s), "write audit", NULL, err,
                     "INSERT INTO audit(at, actor_kind, actor_id, actor_name, action, kb, target, client) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                     "itittttt", (int64_t)time(NULL), e->actor_kind, e->actor_id, e->actor_name, e->action, e->kb,
                     e->target, e->client);
}

cq_status cq_store_audit_list(cq_store *s, int64_t before_id, size_t limit, const char *action, cq_audit_entry **out,
                              size_t *n, cq_err *err) {
    *out = NULL;
    *n = 0;
    cq_db_stmt *st;
    if (cq_db_prepare(cq_store_conn(s),
                      "SELECT id, at, actor_kind, actor_id, actor_name, action, kb, target, client FROM audit "
                      "WHERE (?1 = 0 OR id < ?1) AND (?2 = '' OR action = ?2) ORDER BY id DESC LIMIT ?3",
                      &st, err))
        return cq_err_prefix(err, "read audit: ");
    cq_db_bind_int(st, 1, before_id);
    cq_db_bind_text(st, 2, action ? action : "");
    cq_db_bind_int(st, 3, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    cq_audit_entry *list = NULL;
    size_t count = 0, cap = 0;
    cq_status rc = CQ_OK;
    int step;
    while ((step = cq_db_step(st, "read audit", err)) == CQ_DB_ROW) {
        if (!cq_grow((void **)&list, &cap, count + 1, sizeof *list)) {
            rc = cq_err_set(err, CQ_ERR_NOMEM, "out of memory");
            break;
        }
        cq_audit_entry *e = &list[count++];
        memset(e, 0, sizeof *e);
        e->id = cq_db_col_int(st, 0);
        e->at = cq_db_col_int(st, 1);
        cq_db_col_copy(st, 2, e->actor_kind, sizeof e->actor_kind);
        e->actor_id = cq_db_col_int(st, 3);
        cq_db_col_copy(st, 4, e->actor_name, sizeof e->actor_name);
        cq_db_col_copy(st, 5, e->action, sizeof e->action);
        cq_db_col_copy(st, 6, e->kb, sizeof e->kb);
        cq_db_col_copy(st, 7, e->target, sizeof e->target);
        cq_db_col_copy(st, 8, e->client, sizeof e->client);
    }
    cq_db_finalize(st);
    if (!rc && step < 0) rc = err->code;
    if (rc) {
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return CQ_OK;
}
