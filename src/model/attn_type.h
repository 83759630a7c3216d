/* model.attn_type, the original code's positional encodings, and what each one has: the model,
 * its parameters (params.def), the run's buffers, the cost estimate, the configuration's checks
 * and the CUDA-graph rules ask these predicates instead of comparing the numbers. */
#ifndef TXL_MODEL_ATTN_TYPE_H
#define TXL_MODEL_ATTN_TYPE_H

/* The kinds, C(CONSTANT, name), in the order of the original's --attn_type numbers: TXL_<CONSTANT>
 * is that number (0, 1, ...), which INI files written before the names and the checkpoints' root
 * attribute attn_type hold: the order never changes. `name` is what config.def's model.attn_type
 * writes (this list is its TXL_CFG_CHOICES_attn_type) and txl_attn_name() gives.
 *   rel          Transformer-XL's: R W_r with the biases u and vb
 *   shaw         Shaw et al.'s learnable relative rows r_emb, per-key bias r_bias
 *   abs_sin      absolute sinusoids added to the input
 *   abs_learned  learned absolute positions added at every layer (Al-Rfou et al.) */
#define TXL_ATTN_TYPES(C) C(ATTN_REL, rel) C(ATTN_SHAW, shaw) C(ATTN_ABS_SIN, abs_sin) C(ATTN_ABS_LEARNED, abs_learned)

#define TXL_ATTN_CONSTANT(constant, name) TXL_##constant,
typedef enum { TXL_ATTN_TYPES(TXL_ATTN_CONSTANT) } TxlAttnType;
#undef TXL_ATTN_CONSTANT
#define TXL_ATTN_ONE(constant, name) +1
enum { TXL_ATTN_N_TYPES = 0 TXL_ATTN_TYPES(TXL_ATTN_ONE) }; /* how many kinds (not one of them) */
#undef TXL_ATTN_ONE

/* The kind's name ("shaw"), as the configuration writes it; NULL for a number that is none. */
static inline const char *txl_attn_name(int t) {
#define TXL_ATTN_NAME(constant, name) #name,
  static const char *const names[] = {TXL_ATTN_TYPES(TXL_ATTN_NAME)};
#undef TXL_ATTN_NAME
  return t >= 0 && t < TXL_ATTN_N_TYPES ? names[t] : NULL;
}

/* The attention has the relative term BD (its r: R W_r or the r_emb rows) and the bias u. */
static inline int txl_attn_relative(TxlAttnType t) { return t == TXL_ATTN_REL || t == TXL_ATTN_SHAW; }
/* r = R W_r of the sinusoids R after their dropout, and the bias vb (W_r, r_r_bias). */
static inline int txl_attn_projects_positions(TxlAttnType t) { return t == TXL_ATTN_REL; }
/* The sinusoids R are computed (projected by W_r, or added undropped to the input). */
static inline int txl_attn_sinusoids(TxlAttnType t) { return t == TXL_ATTN_REL || t == TXL_ATTN_ABS_SIN; }
/* Shaw et al.'s per-key bias rb (r_bias) and a bias u per layer. */
static inline int txl_attn_key_bias(TxlAttnType t) { return t == TXL_ATTN_SHAW; }
/* A learned table r_emb of max_klen = tgt_len + mem_len rows per layer. */
static inline int txl_attn_learned_table(TxlAttnType t) { return t == TXL_ATTN_SHAW || t == TXL_ATTN_ABS_LEARNED; }
/* Positions are moved by row gathers of an index the host uploads each forward (not R W_r). */
static inline int txl_attn_gathers_positions(TxlAttnType t) { return t != TXL_ATTN_REL; }
/* Absolute positions added to the rows (at the input, or at every layer). */
static inline int txl_attn_absolute(TxlAttnType t) { return t == TXL_ATTN_ABS_SIN || t == TXL_ATTN_ABS_LEARNED; }
/* The absolute positions are added once, to the input. */
static inline int txl_attn_adds_at_input(TxlAttnType t) { return t == TXL_ATTN_ABS_SIN; }
/* The absolute positions are added at every layer, memory rows too (which then take a gradient). */
static inline int txl_attn_adds_every_layer(TxlAttnType t) { return t == TXL_ATTN_ABS_LEARNED; }

#endif
