/* Command-line flags: "--name value" or "--name=value", parsed, defaulted and
 * described from one table per command (flags.c). */
#ifndef CLT_CLI_H
#define CLT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "status.h"

/* CLT_FLAG_BOOL takes no value: its presence sets the int target to 1. */
typedef enum {
  CLT_FLAG_INT,
  CLT_FLAG_LONG,
  CLT_FLAG_DOUBLE,
  CLT_FLAG_U64,
  CLT_FLAG_STRING,
  CLT_FLAG_BOOL
} clt_flag_type;

/* A flag's `seen`: the int field of the options struct set to 1 when the flag is
 * given (1 + its offset, so that 0 means none). */
#define CLT_SEEN(type, field) (offsetof(type, field) + 1)

/* One flag of a command: its parsing, default and documentation. Its value lives
 * in the command's options struct at `offset` (int, long, double, uint64_t,
 * const char * or int by type). */
typedef struct clt_flag {
  const char *name;  /* without the leading "--" */
  const char *alias; /* a one-letter form taking its value apart ("o": -o FILE), or NULL */
  size_t offset;
  size_t seen;         /* CLT_SEEN(...), or 0 */
  double min, max;     /* inclusive range of an int, long or double */
  double def;          /* a number's default */
  const char *def_str; /* a string's default (NULL: none) */
  const char *meta;    /* the value's name in help and docs: N, DIR, FILE.json */
  const char *help;    /* what it does, one paragraph; a "%s" in it is *insert */
  const char *const *insert;
  const char *shown; /* the default as documented where the value alone would mislead (it
                        depends on the model, data or optimizer): NULL shows the value,
                        "" nothing */
  clt_flag_type type;
  int required; /* a string flag the command cannot do without */
} clt_flag;

/* A command: its flags and the text of its --help, docs/flags.md and man page. */
typedef struct clt_command {
  const char *name;    /* the words after "cltrain": "train", "bench allreduce" */
  const char *summary; /* one line for `cltrain --help` */
  const char *usage;   /* the synopsis, after "usage: " */
  /* Its description: lines ('\n'-ended) of prose (wrapped to the terminal's
   * width), example lines indented by two spaces (kept as they are), and empty
   * lines between paragraphs. */
  const char *text;
  const clt_flag *flags;
  int nflags;
  /* The one argument that is not a flag (LOG.jsonl), a const char * at
   * positional_offset; NULL: none is taken. */
  const char *positional;
  size_t positional_offset;
  /* 0: one such argument at most. Else any number: positional_offset holds a
   * char ** to them (argv's own slots, reused) and an int at
   * positional_count - 1 (CLT_SEEN) gets how many. */
  size_t positional_count;
} clt_command;

/* Sets every flag's field in opts (the command's options struct) to its default;
 * the other fields are left as they are. */
void clt_cli_defaults(const clt_command *c, void *opts);

/* Parses argv[0..argc) into opts against c's flags, and the first argument that is
 * not a flag into c's positional, if it has one. "--help"/"-h" sets *help.
 * Errors are one line naming the command and the flag: "cltrain train: --epochs:
 * expected an integer in [1, 1000000], got 'x'". */
int clt_cli_parse(const clt_command *c, int argc, char **argv, void *opts, int *help, clt_err *e);

/* Fails, naming them all, when a required flag was not given: "cltrain export:
 * --checkpoint DIR|FILE and --onnx FILE are required". */
int clt_cli_check_required(const clt_command *c, const void *opts, clt_err *e);

/* The checkpoint file a --checkpoint DIR|FILE names, into path
 * (clt_checkpoint_resolve_model: with best, --best, the folder's best; without,
 * the newest, or the best where the run ended restoring its weights, with a
 * note); given says whether the user gave it, so a missing default folder is
 * named as the default (where cltrain train saves) rather than as a bad
 * argument. The note is process 0's (rank: this process's). */
int clt_cli_checkpoint(const char *checkpoint, int given, int best, int rank, char *path,
                       size_t size, clt_err *e);

/* `cltrain <command> --help`: usage, description, the options. */
void clt_cli_help(FILE *f, const clt_command *c);

/* A text laid out as clt_command.text for a terminal. */
void clt_cli_print_text(FILE *f, const char *text);

/* The values a number flag takes, as its errors and the docs say them: "an
 * integer in [1, 1000000]", "a number in [0, 0.99]", "a non-negative integer". */
void clt_cli_range(const clt_flag *f, char *buf, size_t size);

/* f's default as documented ("" where none is shown). */
void clt_cli_default(const clt_flag *f, char *buf, size_t size);

/* f's help with its insert. */
void clt_cli_flag_help(const clt_flag *f, char *buf, size_t size);

#endif
