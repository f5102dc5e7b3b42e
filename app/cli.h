/* The clauseqa command line: `clauseqa COMMAND [options]`. Only app/ calls exit(); commands return the exit
 * code (0 success, 1 the work failed, 2 bad usage). Each command lives in its own file app/cli_<name>.c and is
 * listed once in the table in app/cli.c. */
#ifndef CQ_APP_CLI_H
#define CQ_APP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "app/config.h"
#include "app/models.h"

typedef int (*cq_command_fn)(int argc, char **argv); /* argv[0] is "clauseqa NAME" */

typedef struct {
    const char *name;
    cq_command_fn run;
    const char *summary; /* one line for `clauseqa --help` */
} cq_command;

/* Takes the options every command takes (--data, --store, --config, --models, --log-level; before or after the command's
 * name), reads the configuration file (app/config.h) and runs the command with the flags of its section of the file
 * ahead of its own. */
int cq_cli_main(int argc, char **argv);

/* Data directory: --data DIR, else $CLAUSEQA_DATA, else `data =` of clauseqa.conf, else "data". */
const char *cq_cli_data_dir(void);
/* Where the store is (store/store.h cq_store_open_uri): --store WHERE, else `store =` of clauseqa.conf, else NULL
 * (DATA/clauseqa.db). */
const char *cq_cli_store_where(void);
/* The store for messages: the data directory, or --store's value without a password. */
const char *cq_cli_store_name(void);
/* The configuration file read, or NULL. */
const char *cq_cli_config_path(void);
/* The configuration file read (its [ldap] section: app/ldap_auth.h), NULL when none was. */
const cq_config *cq_cli_config(void);
/* The model files, looked for (app/models.h) on first use. */
const cq_models *cq_cli_models(void);

/* For a usage slip: the command printed one line saying what is wrong; this adds where the options are described.
 * Returns 2 (the exit status of bad usage). */
int cq_cli_usage_hint(const char *cmd);

#endif
