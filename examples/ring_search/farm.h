// The free-text retrieval farm's data and work, shared by its MPI form (ring_search.cc) and its
// process-and-pipe form (ring_search_pipes.cc): the synthetic text database, the messages that
// travel the ring, the whole-word search of one share, and the master's verification.
#ifndef PARMON_EXAMPLES_RING_SEARCH_FARM_H_
#define PARMON_EXAMPLES_RING_SEARCH_FARM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/example.h"

namespace ring_search {

constexpr int kMaxPositions = 16;
constexpr int kVocabulary = 2048;

struct WordMessage {
  int32_t index;  // position in the master's list of search words
  int32_t length;
  char text[16];
};

struct ResultMessage {
  int32_t index;
  int32_t worker;
  int32_t hits;
  int32_t positions_used;
  int64_t positions[kMaxPositions];  // offsets into the whole database
};

// The database: words of a synthetic vocabulary separated by single spaces. Word frequencies
// are skewed (a few common words, a long tail) like natural text.
struct Database {
  std::vector<std::string> vocabulary;
  std::string text;
  std::vector<int64_t> occurrences;  // per vocabulary word, as a whole word in the text
};
Database MakeDatabase(long bytes);

// Whole-word occurrences of `word` in `text`, the first kMaxPositions recorded (offset by `base`).
ResultMessage Search(const std::string& text, int64_t base, const WordMessage& word);

// Splits the text into `parts` pieces at spaces; returns the start offsets (parts + 1 entries,
// the last one past the end as if the text ended with a space).
std::vector<int> Split(const std::string& text, int parts);

// The master's search words: vocabulary words picked at random (some common, some rare).
struct SearchList {
  std::vector<WordMessage> words;
  std::vector<int> ids;  // vocabulary index of each word
};
SearchList MakeSearchList(const Database& db, long words);

// Checks every word's summed hits against the database and every reported position, fills the
// report's params and results, prints the one-line summary, and returns whether all was right.
bool VerifyResults(const Database& db,
                   const SearchList& list,
                   const std::vector<ResultMessage>& results,
                   int workers,
                   double seconds,
                   const std::string& form,
                   parmon_examples::Report& report);

}  // namespace ring_search

#endif  // PARMON_EXAMPLES_RING_SEARCH_FARM_H_
