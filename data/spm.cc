// The SentencePiece model of data/spm.h: a SentencePieceProcessor behind the C interface. Every
// entry point catches what the library or the standard library may throw (bad_alloc), so that no
// exception reaches the C callers.
#include "data/spm.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "data/spm_status.h"

struct TxlSpm {
  sentencepiece::SentencePieceProcessor sp;
};

extern "C" {

TxlSpm *txl_spm_load(const void *bytes, size_t n, char *err, size_t cap) {
  TxlSpm *s = nullptr;
  try {
    s = new TxlSpm;
    const auto st = s->sp.LoadFromSerializedProto(absl::string_view(static_cast<const char *>(bytes), n));
    if (!st.ok()) {
      txl_spm::reason(st, "its bytes do not parse as a model", err, cap);
      delete s;
      return nullptr;
    }
    if (s->sp.GetPieceSize() < 1) {
      std::snprintf(err, cap, "the SentencePiece model has no pieces");
      delete s;
      return nullptr;
    }
    return s;
  } catch (const std::exception &e) {
    txl_spm::reason(e, err, cap);
    delete s;
    return nullptr;
  }
}

void txl_spm_free(TxlSpm *s) { delete s; }

int txl_spm_size(const TxlSpm *s) { return s->sp.GetPieceSize(); }
int txl_spm_unk_id(const TxlSpm *s) { return s->sp.unk_id(); }
int txl_spm_eos_id(const TxlSpm *s) { return s->sp.eos_id(); }

const char *txl_spm_piece(const TxlSpm *s, int id, size_t *len) {
  const std::string &p = s->sp.IdToPiece(id);
  *len = p.size();
  return p.data();
}

int txl_spm_piece_id(const TxlSpm *s, const char *piece, size_t len) {
  try {
    const absl::string_view want(piece, len);
    const int id = s->sp.PieceToId(want); // the unknown piece's id when there is no such piece
    return id >= 0 && id < s->sp.GetPieceSize() && s->sp.IdToPiece(id) == want ? id : -1;
  } catch (const std::exception &) {
    return -1;
  }
}

int txl_spm_encode(const TxlSpm *s, const char *text, size_t len, int **ids, size_t *cap, size_t *n,
                   char *err, size_t errcap) {
  try {
    std::vector<int> v;
    const auto st = s->sp.Encode(absl::string_view(text, len), &v);
    if (!st.ok()) {
      txl_spm::reason(st, "SentencePiece could not encode the text", err, errcap);
      return -1;
    }
    if (v.size() > *cap || !*ids) {
      const size_t want = v.size() > 2 * *cap ? v.size() : 2 * *cap;
      int *p = static_cast<int *>(std::realloc(*ids, (want ? want : 1) * sizeof *p));
      if (!p) {
        std::snprintf(err, errcap, "out of memory for %zu token ids", v.size());
        return -1;
      }
      *ids = p;
      *cap = want ? want : 1;
    }
    if (!v.empty()) std::memcpy(*ids, v.data(), v.size() * sizeof(int));
    *n = v.size();
    return 0;
  } catch (const std::exception &e) {
    txl_spm::reason(e, err, errcap);
    return -1;
  }
}

int txl_spm_decode(const TxlSpm *s, const int *ids, size_t n, char **text, size_t *len, char *err,
                   size_t errcap) {
  try {
    const std::vector<int> v(ids, ids + n);
    std::string out;
    const auto st = s->sp.Decode(v, &out);
    if (!st.ok()) {
      txl_spm::reason(st, "SentencePiece could not decode the ids", err, errcap);
      return -1;
    }
    char *t = static_cast<char *>(std::malloc(out.size() + 1));
    if (!t) {
      std::snprintf(err, errcap, "out of memory for %zu bytes of decoded text", out.size());
      return -1;
    }
    std::memcpy(t, out.data(), out.size());
    t[out.size()] = '\0';
    *text = t;
    *len = out.size();
    return 0;
  } catch (const std::exception &e) {
    txl_spm::reason(e, err, errcap);
    return -1;
  }
}

}  // extern "C"
