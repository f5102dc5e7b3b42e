#include "app/cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: clauseqa COMMAND [options]\n"
               "commands: serve ingest retrieve ask eval\n"
               "run `clauseqa COMMAND --help` for a command's options\n");
}

int cq_cli_main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "clauseqa: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
