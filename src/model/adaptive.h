/* Adaptive input and adaptive softmax (Baevski & Auli; Grave et al.), as the original
 * Transformer-XL code uses them: the vocabulary (ids by frequency) is cut into clusters; cluster
 * i embeds in d_embed / div_val^i features, projected to d_model (P [d_model, d_emb_i]: input
 * e P^T, output h P); the softmax's head scores cluster 0's tokens and one entry per tail
 * cluster, a tail token's probability is its cluster's head probability times its probability
 * within the cluster. Private to src/model (model.c calls it). */
#ifndef TXL_MODEL_ADAPTIVE_H
#define TXL_MODEL_ADAPTIVE_H

#include "src/model/adaptive_dims.h"
#include "src/model/model.h"

/* h [LB, d] = scale * the tokens' (projected) embeddings (r->tokens, on the device). */
void txl_adaptive_embed_forward(TxlModel *m, TxlRun *r, void *h, int64_t LB, float scale);
/* Adds the gradients of the embedding tables and projections from dh [LB, d] (d of h). */
void txl_adaptive_embed_backward(TxlModel *m, TxlRun *r, const void *dh, int64_t LB, float scale);
/* The head's logits of r->hout into r->logits; with targets (the host's, checked against the
 * vocabulary; the device's r->targets are grouped) also the tails, the losses
 * (returns their sum over the LB rows) and, when grad_scale != 0, the gradients of the logits. */
double txl_adaptive_output_forward(TxlModel *m, TxlRun *r, const int32_t *targets, int64_t LB, float grad_scale);
/* From the gradients of the last training forward: the output parameters' gradients, and
 * r->dh = d(loss)/d(hout). */
void txl_adaptive_output_backward(TxlModel *m, TxlRun *r, int64_t LB);
/* log p(v | row) for every v ([V], host) after a forward without targets. */
void txl_adaptive_logprobs(TxlModel *m, TxlRun *r, int row, float *out);

#endif
