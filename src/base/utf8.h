// Names and arguments on Linux are bytes, not text: a program may be called `caf\xe9` (Latin-1)
// and its arguments may hold any byte but NUL. Outputs that must be UTF-8 (JSON, the HTML
// report's embedded JSON) take them through ValidUtf8, which keeps every valid UTF-8 sequence and
// writes each byte that is not part of one as the four characters `\xNN` (the form `ls -b` and
// most shells print), so nothing is lost or silently replaced and the output stays well-formed.
#ifndef PARMON_SRC_BASE_UTF8_H_
#define PARMON_SRC_BASE_UTF8_H_

#include <string>
#include <string_view>

namespace parmon {

// True when s is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// s with every byte outside a well-formed UTF-8 sequence written as `\xNN` (upper-case hex).
std::string ValidUtf8(std::string_view s);

}  // namespace parmon

#endif  // PARMON_SRC_BASE_UTF8_H_
