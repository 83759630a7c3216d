/* C++ only (data/spm.cc, data/prep/spm_train.cc): a SentencePiece status as the one-line reason
 * of txl's messages. SentencePiece's messages start with the source place and the failed check
 * ("./src/x.cc(660) [(a) == (b)] Vocabulary size too high ..."): that part is left out. */
#ifndef TXL_DATA_SPM_STATUS_H
#define TXL_DATA_SPM_STATUS_H

#include <sentencepiece_processor.h>

#include <cstdio>
#include <exception>
#include <string>

namespace txl_spm {

/* Writes the reason of a failed status (or of `what` when it has none) into err, on one line. */
inline void reason(const sentencepiece::util::Status &st, const char *what, char *err, size_t cap) {
  if (cap == 0) return;
  std::string m = st.message() ? st.message() : "";
  const size_t close = m.find("] ");
  if (!m.empty() && (m[0] == '[' || m.compare(0, 2, "./") == 0) && close != std::string::npos)
    m.erase(0, close + 2);
  for (char &c : m)
    if (c == '\n' || c == '\r') c = ' ';
  while (!m.empty() && m.back() == ' ') m.pop_back();
  std::snprintf(err, cap, "%s", m.empty() ? what : m.c_str());
}

/* The reason of a C++ exception (out of memory, mostly). */
inline void reason(const std::exception &e, char *err, size_t cap) {
  if (cap) std::snprintf(err, cap, "%s", e.what());
}

}  // namespace txl_spm

#endif
