/* Conversations: the questions a key asked in one KB and the answers it got, kept so that the page can list and
 * reopen them and follow-up questions resolve against the turns before (app/followup.h).
 *
 * A conversation belongs to one owner, the API key that began it (0: open mode's one shared owner) or the signed-in
 * user who did (store/users.h; owner_key_id 0, owner_user_id set), and to one KB
 * (deleted with it). A turn is a question and the reply it got, stored as the JSON text the ask returned (the store
 * does not read it). Turns are kept in the order they were asked; only the last one can be replaced (regenerate).
 *
 * Written once for SQLite and PostgreSQL on db/db.h (issue 28). Two nodes adding turns to one conversation at once
 * are serialised by its row (the update of updated_at comes first).
 *
 * Schema (store/schema.c: SQLite migration 4, PostgreSQL 3):
 *   conversations(id, owner_key_id, kb_id, title, created_at, updated_at, owner_user_id)
 *     owner_user_id: NULL for a key's (store/schema.c: SQLite migration 10, PostgreSQL 7)
 *   conversation_turns(id, conversation_id, question, reply, created_at) */
#ifndef CQ_STORE_CONVERSATIONS_H
#define CQ_STORE_CONVERSATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

#define CQ_CONVERSATION_TITLE_MAX_BYTES 400

typedef struct {
    int64_t id, owner_key_id, kb_id;
    int64_t owner_user_id; /* 0: a key's */
    char kb[128];  /* the KB's name */
    char *title;
    int n_turns;
    int64_t created_at, updated_at; /* unix seconds; updated: when the last turn was added */
} cq_conversation;

typedef struct {
    int64_t id;
    char *question;
    char *reply; /* JSON text */
    int64_t created_at;
} cq_conversation_turn;

void cq_conversation_free(cq_conversation *c);
void cq_conversation_free_array(cq_conversation *c, size_t n);
void cq_conversation_turns_free(cq_conversation_turn *t, size_t n);

/* A new, empty conversation of owner in KB kb_id. INVALID for an empty or over-long title. */
cq_status cq_store_conversation_create(cq_store *s, int64_t owner_key_id, int64_t kb_id, const char *title,
                                       int64_t *id, cq_err *err);
/* The same for a signed-in user's conversation. */
cq_status cq_store_conversation_create_for_user(cq_store *s, int64_t user_id, int64_t kb_id, const char *title,
                                                int64_t *id, cq_err *err);
cq_status cq_store_conversation_get(cq_store *s, int64_t id, cq_conversation *out, cq_err *err); /* NOT_FOUND */
/* The newest conversations first (by their last turn), at most limit: of key owner_key_id (negative: every owner's,
 * users' included), in KB kb_id (0: every KB). */
cq_status cq_store_conversation_list(cq_store *s, int64_t owner_key_id, int64_t kb_id, size_t limit,
                                     cq_conversation **out, size_t *n, cq_err *err);
/* The same for the conversations of user user_id (key_id ignored), else of key key_id; with_open: and those made
 * in open mode (owner 0, before sign-in was turned on), which admins keep seeing. */
cq_status cq_store_conversation_list_owned(cq_store *s, int64_t key_id, int64_t user_id, bool with_open,
                                           int64_t kb_id, size_t limit, cq_conversation **out, size_t *n,
                                           cq_err *err);
cq_status cq_store_conversation_rename(cq_store *s, int64_t id, const char *title, cq_err *err); /* NOT_FOUND */
cq_status cq_store_conversation_delete(cq_store *s, int64_t id, cq_err *err);                    /* NOT_FOUND */

/* The turns in the order they were asked; last_n > 0: only the last last_n of them. */
cq_status cq_store_conversation_turns(cq_store *s, int64_t id, size_t last_n, cq_conversation_turn **out, size_t *n,
                                      cq_err *err);
/* Appends a turn (replace_last: in place of the last one, when there is one) and marks the conversation updated, in
 * one transaction. */
cq_status cq_store_conversation_add_turn(cq_store *s, int64_t id, const char *question, const char *reply,
                                         int replace_last, cq_err *err);

/* Search (issue 30): the conversations as cq_store_conversation_list gives them whose title, a question or an answer
 * (the reply's "answer") holds text (case-insensitive for ASCII letters; % and _ are plain characters). INVALID for
 * an empty text. */
cq_status cq_store_conversation_search(cq_store *s, int64_t owner_key_id, int64_t kb_id, const char *text,
                                       size_t limit, cq_conversation **out, size_t *n, cq_err *err);

#endif
