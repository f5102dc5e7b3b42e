/* The catalog of the server's messages and the matching of a message against it (web/messages.h). */
#include "web/messages.h"

#include <stdbool.h>
#include <string.h>

/* Every format as the source writes it (tests/integration/test_messages.py compares them); the page's Chinese for
 * each code is in web/static/messages.js. */
const cq_web_message cq_web_messages[] = {
    /* authentication and permissions (web/server.c, app/service_auth.c, store/keys.c) */
    {"admin_key_required", "this needs an admin key"},
    {"key_may_not", "this key may not %s knowledge base '%s'"},
    {"admin_user_required", "this needs an admin user"},
    {"user_may_not", "this user may not %s knowledge base '%s'"},
    /* accounts and sign-in (app/service_auth.c, web/server.c) */
    {"sign_in_required", "sign in, or send an API key: Authorization: Bearer <key>"},
    {"sign_in_held_back", "too many failed sign-ins: try again in %d s"},
    {"no_accounts", "this server has no accounts"},
    {"login_body", "give \"user\" and \"password\" as strings"},
    {"no_audit_trail", "this server keeps no audit trail"},
    {"audit_before", "before must be an entry's id"},
    {"bearer_required", "use 'Authorization: Bearer <key>'"},
    {"api_key_required", "an API key is required: Authorization: Bearer <key>"},
    {"unknown_api_key", "unknown API key"},
    {"unknown_or_revoked_api_key", "unknown or revoked API key"},
    {"key_revoked_already", "key %lld is revoked already"},
    {"no_key_with_id", "no key with id %lld"},
    /* requests (web/guard.c, web/http.c, web/server.c) */
    {"path_too_long", "the path is longer than %zu bytes"},
    {"url_nul_byte", "the URL holds an encoded NUL byte (%%00)"},
    {"target_not_path", "the request target must be a path starting with '/' (not '%.60s')"},
    {"header_repeated", "more than one %s header"},
    {"host_not_allowed", "this server does not answer to the host name '%.200s' (see serve --allow-host)"},
    {"cross_origin_change", "requests from pages of %.200s may not change anything here (see serve --cors-origin)"},
    {"origin_not_allowed", "%.200s is not an allowed origin (see serve --cors-origin)"},
    {"file_gone", "the file is gone"},
    {"body_too_large", "the request body is larger than %zu bytes"},
    {"body_timeout", "the request body did not arrive in time"},
    {"body_unreadable", "the request body could not be read (it is cut short or malformed)"},
    {"body_not_json", "the body is not valid JSON: %s"},
    {"body_not_object", "the body must be a JSON object"},
    {"query_number_range", "query parameter '%s' must be a number from %ld to %ld"},
    {"no_such_resource", "no such resource: %s"},
    {"out_of_memory", "out of memory"},
    {"server_stopping", "the server is stopping"},
    {"connections_full", "every connection slot is taken (%d): try again shortly"},
    {"client_connections_full", "this client address holds %d connections already: close some first"},
    {"no_response", "no response was produced"},
    /* knowledge bases and documents */
    {"kb_name_required", "give the knowledge base a \"name\""},
    {"no_kb_named", "no knowledge base named '%s'"},
    {"no_kb_with_id", "no knowledge base with id %lld"},
    {"kb_exists", "knowledge base '%s' exists already"},
    {"kb_name_invalid", "invalid knowledge base name '%s'"},
    {"no_document_with_id", "no document with id %lld"},
    {"no_such_document", "no such document"},
    {"no_clause_with_id", "no clause with id %lld"},
    {"search_q_length", "give q, the text to look for: 1 to %d bytes"},
    {"no_job_with_id", "no job with id %lld"},
    {"clause_not_in_document", "clause %lld is not in document %lld"},
    {"no_stored_original", "document %lld has no stored original"},
    {"original_missing", "the original of document %lld is missing"},
    {"no_page_images", "document %lld is %s, a format without pages: it has no page images"},
    {"no_such_page", "document %lld has %d pages; there is no page %d"},
    {"page_path", "pages are /pages/{n}.png with n from 1"},
    {"clause_param_id", "clause must be a clause id"},
    {"clause_id_param_id", "clause_id must be a clause id"},
    /* uploads and jobs (web/server.c, app/service_jobs.c) */
    {"upload_not_stored", "the upload could not be stored"},
    {"form_no_file", "the form has no file field"},
    {"multipart_malformed", "the multipart body is malformed or cut short"},
    {"filename_header_bad", "X-Filename holds a NUL byte or is too long"},
    {"filename_required", "name the file: ?filename=NAME, an X-Filename header, or a multipart form"},
    {"ocr_mode_invalid", "ocr must be off, auto or force (not '%.20s')"},
    {"upload_not_received", "the upload was not received"},
    {"file_empty", "%s: the file is empty"},
    {"file_name_unusable", "'%s' is not a usable file name"},
    {"document_name_taken",
     "a different document named '%s' is in '%s' already: delete it, or upload with replace=true"},
    {"same_file_exists", "the same file is already in this knowledge base"},
    {"upload_not_kept", "cannot keep the upload: %s"},
    {"upload_on_other_node", "the upload is on another node and not in the store"},
    {"node_crashed_each_time",
     "not tried again: the node running it stopped (a crash, or killed for its memory) during each of the %d times "
     "this document was read"},
    {"job_ended", "job %lld has ended (%s): there is nothing to cancel%s"},
    {"server_crashed_each_time",
     "not tried again: the server stopped (a crash, or killed for its memory) during each of the %d times this "
     "document was read"},
    {"upload_lost", "the upload was lost when the server stopped"},
    /* questions and conversations (web/server.c, web/openai.c, app/service_ask.c, app/service_conversations.c) */
    {"question_too_long", "the question is %zu characters long; at most %d are answered"},
    {"question_required", "\"question\" must be a non-empty string"},
    {"k_range", "\"k\" must be a number from 1 to 50"},
    {"mode_type", "\"mode\" must be a string such as \"hybrid\""},
    {"fusion_values", "\"fusion\" must be \"rrf\", \"keep\" or \"weights\""},
    {"as_of_format", "\"as_of\" must be a day written \"YYYY-MM-DD\""},
    {"as_of_day", "\"as_of\" must be a day written YYYY-MM-DD, not '%s'"},
    {"history_format", "\"history\" must be an array of {role, content} turns"},
    {"conversation_id_type", "\"conversation_id\" must be a conversation's id"},
    {"boolean_field", "\"%s\" must be true or false"},
    {"regenerate_needs_conversation",
     "\"regenerate\" replaces the last turn of a stored conversation: name it with \"conversation_id\""},
    {"conversation_title_required", "give the conversation a \"title\""},
    {"conversation_other_kb", "conversation %lld is about knowledge base '%s', not '%s'"},
    {"no_conversation", "no conversation %lld"},
    /* ratings, exports, conversation search, the quality report (app/service_feedback.c, web/office.c) */
    {"rating_up_or_down", "\"rating\" is \"up\" or \"down\""},
    {"export_format", "format is md or pdf, not \"%s\""},
    {"quality_days_range", "days is 1 to %d"},
    {"rating_body", "send {\"rating\": \"up\" | \"down\", \"comment\": \"...\" (optional)}"},
    {"no_turn", "conversation %lld has no turn %lld"},
    {"search_too_long", "the search text (q) has at most %zu bytes"},
    {"conversation_title_length", "a conversation's title has 1 to %d characters"},
    {"conversation_needs_title", "a conversation needs a title"},
    {"retrieval_mode_unknown", "unknown retrieval mode '%s' (use router, bm25, dense, hybrid or rerank)"},
    {"fusion_unknown", "unknown fusion '%s' (use weights, rrf or keep)"},
    {"model_names_kb", "\"model\" must name a knowledge base"},
    {"messages_required", "\"messages\" must be a non-empty array"},
    {"message_role_required", "message %d needs a \"role\""},
    {"last_message_user", "the last message must be a user message with text"},
    /* versions (app/service_versions.c, store/versions.c, search/compare.c) */
    {"version_day_format", "\"%s\" must be a day written YYYY-MM-DD, or null"},
    {"version_string_length", "\"%s\" must be a string of at most %zu bytes"},
    {"version_field_unknown", "unknown field \"%s\" (use group, label, promulgated, effective, repealed, status)"},
    {"in_force_but_repealed", "\"status\": \"in_force\" contradicts a \"repealed\" day"},
    {"version_status_values", "\"status\" is \"repealed\" or \"in_force\" (the others follow from the dates)"},
    {"versions_need_ready", "document %lld is %s: only ready documents have versions"},
    {"compare_needs_ready", "only ready documents can be compared"},
    {"no_version_information", "document %lld has no version information"},
    {"compare_too_long", "the documents are too long to compare (%zu × %zu clauses)"},
    {"dates_format", "dates are days written YYYY-MM-DD"},
    /* a failed document's reason, in plain words (core/plain_reason.h) */
    {"pdf_damaged", "the PDF is damaged and cannot be read"},
    {"pdf_pages_unreadable", "the PDF is damaged: %d of its %d pages cannot be read"},
    /* the most general formats last: a message matches the first entry that fits */
    {"invalid_header", "invalid %s '%s'"},
    {"method_use", "%s %s: use %s"},
    /* the admin API (web/admin.c, app/service_admin.c) and groups (store/groups.c, store/users.c) */
    {"field_must_be_string", "\"%s\" must be a string"},
    {"kbs_list", "\"kbs\" must be \"*\" or a list of KB names"},
    {"too_many_kbs", "too many knowledge bases (at most %d)"},
    {"role_values", "\"role\" must be admin, editor or reader"},
    {"user_name_password_required", "give the user a \"name\" and a \"password\""},
    {"disabled_bool", "\"disabled\" must be true or false"},
    {"user_change_what", "give what to change: \"role\", \"kbs\" or \"disabled\""},
    {"not_own_account", "you cannot disable your own account or take away your own admin role"},
    {"not_own_removal", "you cannot remove your own account"},
    {"new_password_required", "give the new \"password\""},
    {"admin_no_operation", "admin: no such operation"},
    {"group_name_required", "give the group a \"name\""},
    {"group_change_what", "give what to change: \"role\" or \"kbs\""},
    {"no_key_with_id_text", "no key with id %s"},
    {"subject_is_admin", "%s %s is an admin: it reaches every KB"},
    {"subject_is_directory", "%s %s signs in against the directory: its KBs come from its groups"},
    {"subject_every_kb", "%s %s has every KB (*): change its KBs instead"},
    {"subject_has_kb", "%s %s has knowledge base '%s' already"},
    {"subject_no_kb", "%s %s has no grant of knowledge base '%s'"},
    {"subject_last_kb", "'%s' is the last KB of %s %s: give it another first, or remove the %s"},
    {"no_group_named", "no group named '%s'"},
    {"no_user_named", "no user named '%s'"},
    {"group_exists", "a group named '%s' exists already"},
    {"user_exists", "a user named '%s' exists already"},
    {"member_already", "%s is in group '%s' already"},
    {"member_not", "%s is not in group '%s'"},
    {"account_disabled", "the account %s is disabled: ask an admin"},
    {"wrong_login", "wrong user name or password"},
    {"directory_no_access", "%s's directory groups give no access here: ask an admin"},
    {"directory_unreachable", "the directory (%s) cannot be reached: %s"},
    {"local_name_taken", "a local account is named %s: the directory's %s cannot sign in as it (rename one of them)"},
    {"password_empty", "the password is empty"},
    {"password_too_long", "the password is longer than %d bytes"},
    {"password_not_utf8", "the password is not valid UTF-8"},
    {"password_control", "the password holds a control character"},
    {"password_too_short", "the password is too short: at least %d characters"},
    {"directory_password", "%s signs in against the directory: change the password there"},
    {"admin_no_kb", "an admin %s covers every knowledge base: give no KB"},
    {"needs_kb", "a %s %s needs a KB (one or more names, or * for every KB)"},
    {"every_kb_alone", "* (every KB) cannot be combined with named KBs"},
    {"invalid_group_name", "invalid group name '%.80s': use 1-63 bytes of letters, digits, Chinese characters, '-', '_', '.' or '@'"},
    {"invalid_user_name", "invalid user name '%.80s': use 1-63 bytes of letters, digits, Chinese characters, '-', '_', '.' or '@'"},
};
const size_t cq_web_n_messages = sizeof cq_web_messages / sizeof cq_web_messages[0];

/* ---- matching ------------------------------------------------------------------------------------------------- */

/* A printf conversion at f ('%' first): its length in bytes, and its conversion character. 0 for "%%". */
static size_t conversion(const char *f, char *conv) {
    size_t i = 1;
    if (f[i] == '%') return 0;
    while (f[i] && strchr("-+ #0", f[i])) i++;
    while (f[i] >= '0' && f[i] <= '9') i++;
    if (f[i] == '.') {
        i++;
        while (f[i] >= '0' && f[i] <= '9') i++;
    }
    while (f[i] && strchr("hlLzjt", f[i])) i++;
    *conv = f[i];
    return f[i] ? i + 1 : i;
}

/* Could m[0, n) be what conversion conv wrote? */
static bool fits(char conv, const char *m, size_t n) {
    if (conv == 's' || conv == 'c') return true;
    if (!n) return false;
    size_t i = (m[0] == '-' || m[0] == '+') ? 1 : 0;
    if (i == n) return false;
    for (; i < n; i++)
        if (!(m[i] >= '0' && m[i] <= '9') && !(conv == 'f' || conv == 'g' || conv == 'e') && m[i] != '.') return false;
    return true;
}

#define ARGS_MAX 8

typedef struct {
    const char *start[ARGS_MAX];
    size_t len[ARGS_MAX];
    int n;
} captures;

/* Does message m match format f from here on? The values of its conversions go to c. */
static bool match(const char *f, const char *m, captures *c) {
    while (*f) {
        if (*f != '%') {
            if (*f != *m) return false;
            f++, m++;
            continue;
        }
        char conv = 0;
        size_t flen = conversion(f, &conv);
        if (!flen) { /* "%%" */
            if (*m != '%') return false;
            f += 2, m++;
            continue;
        }
        if (c->n >= ARGS_MAX) return false;
        int slot = c->n++;
        size_t avail = strlen(m);
        for (size_t n = 0; n <= avail; n++) { /* the shortest value that lets the rest match */
            if (!fits(conv, m, n)) continue;
            c->start[slot] = m;
            c->len[slot] = n;
            if (match(f + flen, m + n, c)) return true;
            c->n = slot + 1;
        }
        c->n = slot;
        return false;
    }
    return *m == 0;
}

const char *cq_web_message_code(const char *message, cJSON *args) {
    if (!message) return NULL;
    for (size_t i = 0; i < cq_web_n_messages; i++) {
        captures c = {.n = 0};
        if (!match(cq_web_messages[i].format, message, &c)) continue;
        for (int k = 0; args && k < c.n; k++) {
            char buf[512];
            size_t n = c.len[k] < sizeof buf - 1 ? c.len[k] : sizeof buf - 1;
            memcpy(buf, c.start[k], n);
            buf[n] = 0;
            cJSON_AddItemToArray(args, cJSON_CreateString(buf));
        }
        return cq_web_messages[i].code;
    }
    return NULL;
}
