/* Conversations and their turns on PostgreSQL (issue 20): index/conversations.h's semantics over the tables of
 * store_pg.c's migration 2 (conversations, conversation_turns; the SQLite store's columns). Two nodes adding turns
 * to one conversation at once are serialised by its row (the update of updated_at comes first). */
#ifndef CQ_INDEX_CONVERSATIONS_PG_H
#define CQ_INDEX_CONVERSATIONS_PG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "index/conversations.h"
#include "index/store_pg.h"

/* conversations.c, for both stores: INVALID for an empty or over-long title. */
cq_status cq_conversation_title_check(const char *title, cq_err *err);

cq_status cq_pg_conversation_create(cq_pg *pg, int64_t owner_key_id, int64_t kb_id, const char *title, int64_t *id,
                                    cq_err *err);
cq_status cq_pg_conversation_get(cq_pg *pg, int64_t id, cq_conversation *out, cq_err *err);
cq_status cq_pg_conversation_list(cq_pg *pg, int64_t owner_key_id, int64_t kb_id, size_t limit,
                                  cq_conversation **out, size_t *n, cq_err *err);
cq_status cq_pg_conversation_rename(cq_pg *pg, int64_t id, const char *title, cq_err *err);
cq_status cq_pg_conversation_delete(cq_pg *pg, int64_t id, cq_err *err);
cq_status cq_pg_conversation_turns(cq_pg *pg, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                   cq_err *err);
cq_status cq_pg_conversation_add_turn(cq_pg *pg, int64_t id, const char *question, const char *reply,
                                      int replace_last, cq_err *err);

#endif
