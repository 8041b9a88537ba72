#include "ring_search/farm.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ring_search {

Database MakeDatabase(long bytes) {
  Database db;
  parmon_examples::Random random(4554);
  for (int i = 0; i < kVocabulary; ++i) {
    std::string w;
    int length = 3 + static_cast<int>(random.Below(9));
    for (int c = 0; c < length; ++c)
      w += static_cast<char>('a' + random.Below(26));
    db.vocabulary.push_back(w);
  }
  db.occurrences.assign(kVocabulary, 0);
  db.text.reserve(static_cast<size_t>(bytes) + 16);
  while (static_cast<long>(db.text.size()) < bytes) {
    double u = random.Uniform();
    int id = static_cast<int>(kVocabulary * u * u);
    if (!db.text.empty())
      db.text += ' ';
    db.text += db.vocabulary[id];
  }
  // Occurrences count whole words, so count after generation (vocabulary words may repeat).
  size_t start = 0;
  std::vector<std::pair<std::string, int>> sorted;
  for (int i = 0; i < kVocabulary; ++i)
    sorted.emplace_back(db.vocabulary[i], i);
  std::sort(sorted.begin(), sorted.end());
  while (start < db.text.size()) {
    size_t end = db.text.find(' ', start);
    if (end == std::string::npos)
      end = db.text.size();
    std::string w = db.text.substr(start, end - start);
    auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(w, -1));
    for (; it != sorted.end() && it->first == w; ++it)
      ++db.occurrences[it->second];
    start = end + 1;
  }
  return db;
}

ResultMessage Search(const std::string& text, int64_t base, const WordMessage& word) {
  ResultMessage r{};
  r.index = word.index;
  size_t n = static_cast<size_t>(word.length);
  const char* begin = text.data();
  const char* end = begin + text.size();
  for (const char* p = begin; p + n <= end;) {
    const char* space = static_cast<const char*>(memchr(p, ' ', static_cast<size_t>(end - p)));
    const char* token_end = space ? space : end;
    if (static_cast<size_t>(token_end - p) == n && memcmp(p, word.text, n) == 0) {
      if (r.positions_used < kMaxPositions)
        r.positions[r.positions_used++] = base + (p - begin);
      ++r.hits;
    }
    if (!space)
      break;
    p = space + 1;
  }
  return r;
}

std::vector<int> Split(const std::string& text, int parts) {
  std::vector<int> cut{0};
  for (int i = 1; i < parts; ++i) {
    size_t at = text.size() * static_cast<size_t>(i) / static_cast<size_t>(parts);
    at = text.find(' ', at);
    cut.push_back(at == std::string::npos ? static_cast<int>(text.size())
                                          : static_cast<int>(at) + 1);
  }
  cut.push_back(static_cast<int>(text.size()) + 1);  // as if the text ended with a space
  return cut;
}

SearchList MakeSearchList(const Database& db, long words) {
  parmon_examples::Random random(1991);
  SearchList list;
  list.words.resize(static_cast<size_t>(words));
  list.ids.resize(static_cast<size_t>(words));
  for (long i = 0; i < words; ++i) {
    list.ids[i] = static_cast<int>(random.Below(kVocabulary));
    const std::string& w = db.vocabulary[list.ids[i]];
    list.words[i] = WordMessage{static_cast<int32_t>(i), static_cast<int32_t>(w.size()), {}};
    memcpy(list.words[i].text, w.data(), w.size());
  }
  return list;
}

bool VerifyResults(const Database& db,
                   const SearchList& list,
                   const std::vector<ResultMessage>& results,
                   int workers,
                   double seconds,
                   const std::string& form,
                   parmon_examples::Report& report) {
  const long words = static_cast<long>(list.words.size());
  const std::vector<int>& ids = list.ids;
  std::vector<int64_t> hits(static_cast<size_t>(words), 0);
  std::vector<int> answers(static_cast<size_t>(words), 0);
  struct {
    bool ok = true;
    int64_t total_hits = 0;
    double seconds = 0;
  } out;
  out.seconds = seconds;
  for (const ResultMessage& r : results) {
    bool sane = r.index >= 0 && r.index < words && r.worker >= 1 && r.worker <= workers;
    if (!sane) {
      out.ok = false;
      continue;
    }
    hits[r.index] += r.hits;
    ++answers[r.index];
    const std::string& w = db.vocabulary[ids[r.index]];
    for (int k = 0; k < r.positions_used; ++k) {
      int64_t p = r.positions[k];
      bool at_word = p >= 0 && p + static_cast<int64_t>(w.size()) <= (int64_t)db.text.size() &&
                     db.text.compare(static_cast<size_t>(p), w.size(), w) == 0;
      if (!at_word)
        out.ok = false;
    }
  }
  int wrong = 0;
  for (long i = 0; i < words; ++i) {
    out.total_hits += hits[i];
    if (answers[i] != workers || hits[i] != db.occurrences[ids[i]])
      ++wrong;
  }
  if (wrong) {
    fprintf(stderr, "%s: %d of %ld words have wrong hit counts\n", report.example.c_str(), wrong,
            words);
    out.ok = false;
  }
  report.params = {{"form", form},
                   {"ranks", workers + 1},
                   {"workers", workers},
                   {"words", words},
                   {"db_bytes", db.text.size()}};
  report.results = {{"seconds", out.seconds},
                    {"words_per_second", out.seconds > 0 ? words / out.seconds : 0.0},
                    {"total_hits", out.total_hits},
                    {"wrong_words", wrong}};
  printf(
      "%s (%s form): %d workers, %ld words over %zu bytes: %.3f s, %.0f words/s, "
      "%lld hits, %s\n",
      report.example.c_str(), form.c_str(), workers, words, db.text.size(), out.seconds,
      out.seconds > 0 ? words / out.seconds : 0.0, static_cast<long long>(out.total_hits),
      out.ok ? "all hit counts correct" : "WRONG hit counts");
  return out.ok;
}

}  // namespace ring_search
