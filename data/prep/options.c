/* txl-prep's command line: the option table (--help's text), each option's value, and the checks
 * of the options a mode takes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/prep/options.h"
#include "src/base/cli.h"
#include "src/base/error.h"

const char *const PREP_SPLIT[N_SPLITS] = {"train", "valid", "test"};

/* ---------------------------------------------------------------------------------------------
 * Command line
 * ------------------------------------------------------------------------------------------- */

/* The options, in --help order (the rows with a value take "--opt value" or "--opt=value"). */
enum { OPT_MODE, OPT_TRAIN, OPT_VALID, OPT_TEST, OPT_OUT, OPT_LOWER, OPT_MIN_FREQ, OPT_MAX_SIZE, OPT_VOCAB_FROM,
       OPT_SPM_VOCAB, OPT_SPM_TYPE, OPT_SPM_MODEL, OPT_BPE_TOKENIZER, OPT_BPE_VOCAB, OPT_BPE_MERGES,
       OPT_BPE_PREFIX_SPACE, OPT_DTYPE, OPT_QUIET, N_OPTS };
static const TxlToolOption OPTS[N_OPTS] = {
    [OPT_MODE] = {"--mode", "MODE", NULL, NULL,
        "(required) how text becomes tokens:\n"
        "  word  as the original Transformer-XL: each line is stripped and split\n"
        "        on whitespace (Python's str.split(): Unicode whitespace), and\n"
        "        <eos> is appended to every line, an empty line included. Lines\n"
        "        end at \\n, \\r\\n or \\r. Vocabulary: <eos> (id 0), then the\n"
        "        words by descending count, ties by first occurrence (train,\n"
        "        valid, test in that order). When some word of any split is not\n"
        "        in the vocabulary it becomes <unk>; <unk> is then added as id 1\n"
        "        unless the text has a <unk> word that is in the vocabulary.\n"
        "  char  every Unicode character (UTF-8 code point) is a token, line\n"
        "        ends included as they are (\\n; \\r\\n is two tokens); no <eos>.\n"
        "        Vocabulary: the characters sorted by code point (deterministic,\n"
        "        independent of frequencies); a needed <unk> is added last.\n"
        "  byte  every byte is a token; the vocabulary is the 256 byte values,\n"
        "        always all of them, id = byte value. No UTF-8 check.\n"
        "  spm   subwords of a SentencePiece model, trained on the training split\n"
        "        (--spm-vocab, --spm-type) or given (--spm-model) and stored in the\n"
        "        output (/spm_model). Each line (\\n, \\r\\n or \\r ends it) is\n"
        "        encoded on its own and ended by the model's end-of-sentence piece\n"
        "        </s> (the <eos> of word mode); characters the model does not know\n"
        "        become its <unk>. Vocabulary: the model's pieces, numbered by\n"
        "        descending count in the training split (ties: SentencePiece's\n"
        "        order), so that id 0 is the most frequent (adaptive softmax).\n"
        "  bpe   a given byte-level BPE (GPT-2, Hugging Face tokenizers):\n"
        "        --bpe-tokenizer or --bpe-vocab with --bpe-merges. Each file is\n"
        "        encoded as one text (line ends as Python's text mode reads them:\n"
        "        \\r\\n and \\r become \\n), exactly as tokenizers encodes it; no\n"
        "        <eos> is added. Ids and vocabulary: the tokenizer's; each token\n"
        "        stored as its bytes, the merges and added tokens stored too\n"
        "        (docs/bpe.md).\n"
        "Invalid UTF-8 (word, char, spm, bpe) is an error naming the file and line."},
    [OPT_TRAIN] = {"--train", "FILE", NULL, NULL,
        "(required) training text"},
    [OPT_VALID] = {"--valid", "FILE", NULL, NULL,
        "(required) validation text"},
    [OPT_TEST] = {"--test", "FILE", NULL, NULL,
        "(required) test text"},
    [OPT_OUT] = {"--out", "FILE.h5", NULL, NULL,
        "(required) output corpus; written as FILE.h5.tmp-<pid>@<host>, then\n"
        "renamed (such files of this host whose process no longer runs are\n"
        "removed first, with a notice)"},
    [OPT_LOWER] = {"--lower", NULL, NULL, NULL,
        "lower-case the text first: ASCII letters only (A-Z), not Unicode\n"
        "(default: off)"},
    [OPT_MIN_FREQ] = {"--min-freq", "N", NULL, NULL,
        "leave out tokens counted fewer than N times (default: 0 = keep all;\n"
        "word and char modes)"},
    [OPT_MAX_SIZE] = {"--max-size", "N", NULL, NULL,
        "at most N tokens in the vocabulary, <eos> and <unk> included; the most\n"
        "frequent are kept (default: 0 = no limit; word and char modes)"},
    [OPT_VOCAB_FROM] = {"--vocab-from", "S", NULL, NULL,
        "count the vocabulary over 'train' only or over 'all' three splits\n"
        "(--mode spm: train only, 'all' refused) (default: all)"},
    [OPT_SPM_VOCAB] = {"--spm-vocab", "N", NULL, NULL,
        "--mode spm: train a model of exactly N pieces (its <unk>, <s> and </s>\n"
        "included) on the training split (--lower applied); needs N >= the\n"
        "split's distinct characters + 3 and not more pieces than the text\n"
        "yields. Trained without normalization and keeping every space, so that\n"
        "decoding gives each line back byte for byte; deterministic (one\n"
        "thread, every line, no sampling). Required unless --spm-model is given"},
    [OPT_SPM_TYPE] = {"--spm-type", "T", NULL, NULL,
        "--mode spm: the model trained with --spm-vocab: unigram or bpe\n"
        "(default: unigram, as SentencePiece)"},
    [OPT_SPM_MODEL] = {"--spm-model", "FILE", NULL, NULL,
        "--mode spm: use this SentencePiece model (a .model file, e.g. of\n"
        "spm_train) instead of training one; its normalization applies. It must\n"
        "have an end-of-sentence piece. Excludes --spm-vocab and --spm-type"},
    [OPT_BPE_TOKENIZER] = {"--bpe-tokenizer", "FILE", NULL, NULL,
        "--mode bpe: a tokenizers tokenizer.json: model BPE, pre-tokenizer\n"
        "ByteLevel (its add_prefix_space and use_regex apply), normalizer null;\n"
        "its added_tokens are matched literally first. Anything else (another\n"
        "model, normalizer or post-processor, dropout, byte_fallback, a subword\n"
        "prefix, ...) is refused. Excludes --bpe-vocab and --bpe-merges"},
    [OPT_BPE_VOCAB] = {"--bpe-vocab", "FILE", NULL, NULL,
        "--mode bpe: a GPT-2 vocab.json (token: id), with --bpe-merges; no\n"
        "added tokens (as tokenizers' ByteLevelBPETokenizer(vocab, merges))"},
    [OPT_BPE_MERGES] = {"--bpe-merges", "FILE", NULL, NULL,
        "--mode bpe: a GPT-2 merges.txt (one merge \"a b\" a line, by rank; a\n"
        "first line #version... is skipped), with --bpe-vocab"},
    [OPT_BPE_PREFIX_SPACE] = {"--bpe-prefix-space", NULL, NULL, NULL,
        "--mode bpe with --bpe-vocab: add_prefix_space (a space put before a\n"
        "text that does not start with one) (default: off)"},
    [OPT_DTYPE] = {"--dtype", "T", NULL, NULL,
        "stored id type: auto = the smallest unsigned type that holds\n"
        "vocab_size - 1, or uint8|uint16|uint32 (an error when the vocabulary\n"
        "does not fit) (default: auto)"},
    [OPT_QUIET] = {"--quiet", NULL, NULL, NULL,
        "no progress (stderr) and no summary (stdout); errors still printed"},
};

static void usage(FILE *f) {
  fprintf(f,
      "usage: txl-prep --mode word|char|byte|spm|bpe --train FILE --valid FILE --test FILE --out FILE.h5\n"
      "                [--lower] [--min-freq N] [--max-size N] [--vocab-from train|all]\n"
      "                [--spm-vocab N [--spm-type unigram|bpe] | --spm-model FILE]\n"
      "                [--bpe-tokenizer FILE | --bpe-vocab FILE --bpe-merges FILE [--bpe-prefix-space]]\n"
      "                [--dtype auto|uint8|uint16|uint32] [--quiet]\n"
      "\n"
      "Turns three text files into one HDF5 corpus file for txl-train (layout: data/FORMAT.md).\n"
      "\n");
  txl_tool_options_help(f, OPTS, N_OPTS, 23);
  fprintf(f,
      "  --help, -h           this text\n"
      "\n"
      "The same input and options always give a byte-identical output file.\n");
}

static int64_t parse_count(const char *opt, const char *s) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno || v < 0)
    txl_fatal("%s: '%s' is not a non-negative integer (see txl-prep --help)", opt, s);
  return (int64_t)v;
}

/* Sets the option of row k from its value val. */
static void set_option(PrepOptions *o, int k, const char *name, const char *val) {
  switch (k) {
    case OPT_MODE:
      if (!strcmp(val, "word")) o->mode = MODE_WORD;
      else if (!strcmp(val, "char")) o->mode = MODE_CHAR;
      else if (!strcmp(val, "byte")) o->mode = MODE_BYTE;
      else if (!strcmp(val, "spm")) o->mode = MODE_SPM;
      else if (!strcmp(val, "bpe")) o->mode = MODE_BPE;
      else txl_fatal("--mode: '%s' is not one of word, char, byte, spm, bpe", val);
      o->mode_name = val;
      break;
    case OPT_TRAIN: o->path[0] = val; break;
    case OPT_VALID: o->path[1] = val; break;
    case OPT_TEST: o->path[2] = val; break;
    case OPT_OUT: o->out = val; break;
    case OPT_MIN_FREQ: o->min_freq = parse_count(name, val); break;
    case OPT_MAX_SIZE: o->max_size = parse_count(name, val); break;
    case OPT_VOCAB_FROM:
      if (!strcmp(val, "train")) o->vocab_train_only = 1;
      else if (!strcmp(val, "all")) o->vocab_train_only = 0;
      else txl_fatal("--vocab-from: '%s' is not one of train, all", val);
      o->vocab_from_given = 1;
      break;
    case OPT_SPM_VOCAB:
      o->spm_vocab = parse_count(name, val);
      if (o->spm_vocab < 1 || o->spm_vocab > MAX_VOCAB)
        txl_fatal("--spm-vocab: %lld is outside [1, 2^31 - 1]", (long long)o->spm_vocab);
      break;
    case OPT_SPM_TYPE:
      if (strcmp(val, "unigram") && strcmp(val, "bpe")) txl_fatal("--spm-type: '%s' is not one of unigram, bpe", val);
      o->spm_type = val;
      break;
    case OPT_SPM_MODEL:
      if (!*val) txl_fatal("--spm-model needs a file name");
      o->spm_model = val;
      break;
    case OPT_BPE_TOKENIZER:
    case OPT_BPE_VOCAB:
    case OPT_BPE_MERGES:
      if (!*val) txl_fatal("%s needs a file name", name);
      if (k == OPT_BPE_TOKENIZER) o->bpe_tokenizer = val;
      else if (k == OPT_BPE_VOCAB) o->bpe_vocab = val;
      else o->bpe_merges = val;
      break;
    case OPT_BPE_PREFIX_SPACE: o->bpe_prefix_space = 1; break;
    case OPT_DTYPE:
      if (strcmp(val, "auto") && strcmp(val, "uint8") && strcmp(val, "uint16") && strcmp(val, "uint32"))
        txl_fatal("--dtype: '%s' is not one of auto, uint8, uint16, uint32", val);
      o->dtype = val;
      break;
    case OPT_LOWER: o->lower = 1; break;
    case OPT_QUIET: o->quiet = 1; break;
  }
}

/* --mode spm: a model trained (--spm-vocab) or given (--spm-model), its pieces the vocabulary. */
static void check_spm_options(PrepOptions *o) {
  if (o->min_freq > 0 || o->max_size > 0)
    txl_fatal("--min-freq and --max-size do not apply to --mode spm (the vocabulary is the model's "
              "pieces: choose their number with --spm-vocab)");
  if (o->vocab_from_given && !o->vocab_train_only)
    txl_fatal("--vocab-from all does not apply to --mode spm (the model is trained on, and its pieces "
              "numbered by, the training split)");
  o->vocab_train_only = 1;
  if (o->spm_model && (o->spm_vocab || o->spm_type))
    txl_fatal("--spm-vocab and --spm-type train a model; they do not go with --spm-model %s (the "
              "model's own pieces are used)", o->spm_model);
  if (!o->spm_model && !o->spm_vocab)
    txl_fatal("--mode spm needs --spm-vocab N (train a model of N pieces on the training split) or "
              "--spm-model FILE (see txl-prep --help)");
  if (!o->spm_model && !o->spm_type) o->spm_type = "unigram";
}

/* --mode bpe: a given tokenizer, its ids as they are. */
static void check_bpe_options(const PrepOptions *o) {
  if (o->lower || o->min_freq > 0 || o->max_size > 0 || o->vocab_from_given)
    txl_fatal("--lower, --min-freq, --max-size and --vocab-from do not apply to --mode bpe (the tokenizer's "
              "vocabulary and ids are used as they are)");
  if (o->bpe_tokenizer && (o->bpe_vocab || o->bpe_merges || o->bpe_prefix_space))
    txl_fatal("--bpe-tokenizer %s excludes --bpe-vocab, --bpe-merges and --bpe-prefix-space (the tokenizer "
              "file holds them)", o->bpe_tokenizer);
  if (!o->bpe_tokenizer && (!o->bpe_vocab || !o->bpe_merges))
    txl_fatal("--mode bpe needs --bpe-tokenizer FILE (a tokenizer.json) or --bpe-vocab FILE and --bpe-merges FILE "
              "(see txl-prep --help)");
}

void txl_prep_parse_args(int argc, char **argv, PrepOptions *o) {
  memset(o, 0, sizeof *o);
  o->mode = -1;
  o->dtype = "auto";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    const int flag = txl_tool_option_find(OPTS, N_OPTS, a);
    if (flag >= 0 && !OPTS[flag].arg) {
      set_option(o, flag, a, NULL);
      continue;
    }
    /* options with a value: "--opt value" or "--opt=value" */
    char name[64];
    const char *val = NULL, *eq = strchr(a, '=');
    if (strncmp(a, "--", 2) != 0)
      txl_fatal("unexpected argument '%s' (see txl-prep --help)", a);
    if (eq) {
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
    }
    const int k = txl_tool_option_find(OPTS, N_OPTS, name);
    if (k < 0 || !OPTS[k].arg) txl_fatal("unknown option '%s' (see txl-prep --help)", a);
    if (!val) {
      if (i + 1 >= argc) txl_fatal("%s needs a value (see txl-prep --help)", name);
      val = argv[++i];
    }
    set_option(o, k, name, val);
  }
  if (o->mode < 0) txl_fatal("--mode is required (see txl-prep --help)");
  for (int k = 0; k < N_SPLITS; k++)
    if (!o->path[k] || !*o->path[k]) txl_fatal("--%s FILE is required (see txl-prep --help)", PREP_SPLIT[k]);
  if (!o->out || !*o->out) txl_fatal("--out FILE.h5 is required (see txl-prep --help)");
  if (o->mode == MODE_BYTE && (o->min_freq > 0 || o->max_size > 0))
    txl_fatal("--min-freq and --max-size do not apply to --mode byte (its vocabulary is the 256 "
              "byte values)");
  if (o->mode != MODE_SPM && (o->spm_vocab || o->spm_type || o->spm_model))
    txl_fatal("--spm-vocab, --spm-type and --spm-model apply only to --mode spm");
  if (o->mode != MODE_BPE && (o->bpe_tokenizer || o->bpe_vocab || o->bpe_merges || o->bpe_prefix_space))
    txl_fatal("--bpe-tokenizer, --bpe-vocab, --bpe-merges and --bpe-prefix-space apply only to --mode bpe");
  if (o->mode == MODE_SPM) check_spm_options(o);
  if (o->mode == MODE_BPE) check_bpe_options(o);
}
