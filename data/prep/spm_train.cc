// SentencePiece training of data/prep/spm_train.h. No exception leaves txl_spm_train.
#include "data/prep/spm_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <unordered_map>

#include "data/spm_status.h"

namespace {

// The lines of txl-prep's reader as SentencePiece's sentence source.
class Lines : public sentencepiece::SentenceIterator {
 public:
  Lines(TxlSpmNextLine next, void *ctx) : next_(next), ctx_(ctx) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    const char *p = nullptr;
    size_t n = 0;
    if (!done_ && next_(ctx_, &p, &n)) line_.assign(p, n);
    else done_ = true;
  }
  const std::string &value() const override { return line_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  TxlSpmNextLine next_;
  void *ctx_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

extern "C" int txl_spm_train(const char *type, int vocab_size, TxlSpmNextLine next, void *ctx, char **model,
                             size_t *model_len, char *err, size_t cap) {
  try {
    const std::unordered_map<std::string, std::string> args = {
        {"model_type", type},
        {"vocab_size", std::to_string(vocab_size)},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"character_coverage", "1.0"},
        {"num_threads", "1"},
        {"input_sentence_size", "0"},          // every line
        {"shuffle_input_sentence", "false"},
        {"hard_vocab_limit", "true"},         // exactly vocab_size pieces, or an error
        {"minloglevel", "2"},                  // no progress log on stderr
    };
    sentencepiece::SetRandomGeneratorSeed(20261124u);
    Lines lines(next, ctx);
    std::string bytes;
    const auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines, &bytes);
    if (!st.ok()) {
      txl_spm::reason(st, "SentencePiece training failed", err, cap);
      return -1;
    }
    char *m = static_cast<char *>(std::malloc(bytes.size() ? bytes.size() : 1));
    if (!m) {
      std::snprintf(err, cap, "out of memory for a model of %zu bytes", bytes.size());
      return -1;
    }
    std::memcpy(m, bytes.data(), bytes.size());
    *model = m;
    *model_len = bytes.size();
    return 0;
  } catch (const std::exception &e) {
    txl_spm::reason(e, err, cap);
    return -1;
  }
}
