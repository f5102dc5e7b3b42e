/* Fault injection for the crash tests (docs/RELIABILITY.md): CLAUSEQA_FAULT=POINT in the environment makes the
 * process exit at once (status 86, no clean-up, as a kill -9 would) when it reaches that point. Points:
 *   after-document-commit   the ingest pipeline has committed a document, or a batch ingest a group (app/ingest.c)
 *   while-reading           an ingestion job of the server has read its first page (app/service_jobs.c)
 *   in-temp-write           a file written whole is still under its temporary name (cq_file_write_atomic)
 * Unset (always, outside the tests), a point costs one getenv. */
#ifndef CQ_CORE_FAULT_H
#define CQ_CORE_FAULT_H

/* Exits the process with status 86 when CLAUSEQA_FAULT names point. */
void cq_fault_point(const char *point);

/* Delays for the load tests: CLAUSEQA_FAULT_DELAY=POINT:MS makes each thread that reaches point sleep MS
 * milliseconds (at most 60,000). Points:
 *   ask-answering           an ask has its place (app/admission.h) and is about to be answered (app/service_ask.c)
 *   job-page                an ingestion job of the server has read a page (app/service_jobs.c): a slow ingest,
 *                           so that the cluster test can kill -9 the node running it (tests/cluster/)
 */
void cq_fault_delay(const char *point);

#endif
