/* The clauseqa command line: `clauseqa COMMAND [options]`. Only app/ calls exit(); cq_cli_main returns the exit
 * code (0 success, 1 failure of the work, 2 bad usage). */
#ifndef CQ_APP_CLI_H
#define CQ_APP_CLI_H

int cq_cli_main(int argc, char **argv);

#endif
