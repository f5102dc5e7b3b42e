/* clauseqa: entry point. Every command lives in app/cli_*.c; main only dispatches. */
#include "app/cli.h"

int main(int argc, char **argv) { return cq_cli_main(argc, argv); }
