/* The clauseqa command line: `clauseqa COMMAND [options]`. Only app/ calls exit(); commands return the exit
 * code (0 success, 1 the work failed, 2 bad usage). Each command lives in its own file app/cli_<name>.c and is
 * listed once in the table in app/cli.c. */
#ifndef CQ_APP_CLI_H
#define CQ_APP_CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef int (*cq_command_fn)(int argc, char **argv); /* argv[0] is the command name */

typedef struct {
    const char *name;
    cq_command_fn run;
    const char *summary; /* one line for `clauseqa --help` */
} cq_command;

int cq_cli_main(int argc, char **argv);

/* Data directory: --data DIR, else $CLAUSEQA_DATA, else "data". */
const char *cq_cli_data_dir(const char *flag_value);

#endif
