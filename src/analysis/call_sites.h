// Code addresses recorded as "0x<offset> <module path>" (StringCategory::kCallSite: where the
// program called an MPI function, where an OpenMP parallel construct is) resolved after the run
// to "file.c:LINE (function)" from the module's DWARF line table (elfutils' libdw), or
// "module (function)" without line information; the raw form when the module cannot be read.
// Each module is opened once per resolver.
#ifndef PARMON_SRC_ANALYSIS_CALL_SITES_H_
#define PARMON_SRC_ANALYSIS_CALL_SITES_H_

#include <memory>
#include <string>

namespace parmon::analysis {

struct OmpProfile;

class CallSiteResolver {
 public:
  CallSiteResolver();
  ~CallSiteResolver();
  CallSiteResolver(const CallSiteResolver&) = delete;
  CallSiteResolver& operator=(const CallSiteResolver&) = delete;
  // A string that is not in the raw form comes back as it is.
  std::string Resolve(const std::string& raw);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Names each OpenMP parallel construct by where it is in the code (its raw return address
// resolved as above).
void ResolveOmpConstructs(OmpProfile* omp);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_CALL_SITES_H_
