// The MPI profile per call site (mpiP's call-site table): trace mode's MpiEnter carries the
// program's return address as an interned "0x<offset> <module path>" (the offset from where the
// module was loaded, so it means the same in every process). After the run, each module is opened
// once with elfutils' libdwfl, offline, and the address one byte before the return address (inside
// the call instruction) is looked up in its DWARF line table: "file.c:LINE (function)". A module
// without debug information keeps its function name when its symbol table has one, and a module
// that is gone or unreadable keeps the raw form: the table is never wrong, at worst unresolved.
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "analysis/call_sites.h"
#include "analysis/mpi_time.h"

#ifdef PARMON_HAVE_LIBDW
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#endif

namespace parmon::analysis {
namespace {

#ifdef PARMON_HAVE_LIBDW
// One module opened for lookups: its Dwfl session and the address its first segment was linked
// at (a non-PIE executable's offsets count from there, a PIE's or a library's from 0).
struct Module {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  uint64_t link_base = 0;
  ~Module() {
    if (dwfl)
      dwfl_end(dwfl);
  }
};

const Dwfl_Callbacks kOffline = {
    .find_elf = nullptr,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

std::unique_ptr<Module> OpenModule(const std::string& path) {
  auto m = std::make_unique<Module>();
  m->dwfl = dwfl_begin(&kOffline);
  if (!m->dwfl)
    return nullptr;
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, path.c_str(), path.c_str(), -1, 0, false);
  dwfl_report_end(m->dwfl, nullptr, nullptr);
  if (!m->mod)
    return nullptr;
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(m->mod, &bias);
  size_t n = 0;
  if (!elf || elf_getphdrnum(elf, &n) != 0)
    return nullptr;
  uint64_t lowest = UINT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      lowest =
          std::min<uint64_t>(lowest, ph.p_vaddr & ~(uint64_t{ph.p_align ? ph.p_align : 1} - 1));
  }
  m->link_base = (lowest == UINT64_MAX ? 0 : lowest) + bias;
  return m;
}
#endif

}  // namespace

// Resolves the raw sites, each module opened once.
class CallSiteResolver::Impl {
 public:
  std::string Resolve(const std::string& raw) {
    auto [it, fresh] = done_.try_emplace(raw);
    if (fresh)
      it->second = Lookup(raw);
    return it->second;
  }

 private:
  std::string Lookup(const std::string& raw) {
    size_t space = raw.find(' ');
    if (raw.rfind("0x", 0) != 0 || space == std::string::npos)
      return raw;
    uint64_t offset = std::strtoull(raw.c_str() + 2, nullptr, 16);
    std::string path = raw.substr(space + 1);
#ifdef PARMON_HAVE_LIBDW
    auto [it, fresh] = modules_.try_emplace(path);
    if (fresh)
      it->second = OpenModule(path);
    Module* m = it->second.get();
    if (!m || offset == 0)
      return raw;
    const Dwarf_Addr addr = m->link_base + offset - 1;  // inside the call instruction
    const char* func = dwfl_module_addrname(m->mod, addr);
    std::string where;
    auto set = [&](const char* file, int lineno) {
      if (!file)
        return;
      std::string f = file;
      where = fmt::format("{}:{}", f.substr(f.rfind('/') + 1), lineno);
    };
    if (Dwfl_Line* line = dwfl_module_getsrc(m->mod, addr)) {
      int lineno = 0;
      const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      set(file, lineno);
    } else {
      // No .debug_aranges (clang does not write them by default): find the unit by its ranges.
      Dwarf_Addr bias = 0;
      for (Dwarf_Die* cu = nullptr; (cu = dwfl_module_nextcu(m->mod, cu, &bias)) != nullptr;) {
        if (dwarf_haspc(cu, addr - bias) <= 0)
          continue;
        if (Dwarf_Line* dl = dwarf_getsrc_die(cu, addr - bias)) {
          int lineno = 0;
          dwarf_lineno(dl, &lineno);
          const char* file = dwarf_linesrc(dl, nullptr, nullptr);
          set(file, lineno);
        }
        break;
      }
    }
    std::string mod = path.substr(path.rfind('/') + 1);
    if (where.empty())
      return func ? fmt::format("{} ({})", mod, func) : raw;
    return func ? fmt::format("{} ({})", where, func) : where;
#else
    return raw;
#endif
  }

  std::map<std::string, std::string> done_;
#ifdef PARMON_HAVE_LIBDW
  std::map<std::string, std::unique_ptr<Module>> modules_;
#endif
};

CallSiteResolver::CallSiteResolver() : impl_(std::make_unique<Impl>()) {}
CallSiteResolver::~CallSiteResolver() = default;
std::string CallSiteResolver::Resolve(const std::string& raw) {
  return impl_->Resolve(raw);
}

void ResolveOmpConstructs(OmpProfile* omp) {
  CallSiteResolver resolver;
  for (auto& r : omp->regions)
    r.construct = resolver.Resolve(r.construct);
}

void BuildMpiCallSites(Results* res) {
  CallSiteResolver resolver;
  struct Agg {
    uint64_t calls = 0, ns = 0;
    std::map<int32_t, uint64_t> by_rank;
  };
  std::map<std::pair<std::string, std::string>, Agg> sites;  // (site, function)
  for (auto& l : res->locations) {
    if (l.type != LocationKind::kThread)
      continue;
    for (auto& cs : l.mpi_call_sites) {
      cs.site = resolver.Resolve(cs.site);
      if (l.rank < 0)
        continue;
      Agg& a = sites[{cs.site, cs.function}];
      a.calls += cs.calls;
      a.ns += cs.ns;
      a.by_rank[l.rank] += cs.ns;
    }
  }
  auto& out = res->mpi.call_sites;
  out.clear();
  for (const auto& [key, a] : sites) {
    MpiCallSiteStat s;
    s.site = key.first;
    s.function = key.second;
    s.calls = a.calls;
    s.ns = a.ns;
    s.ranks = static_cast<uint32_t>(a.by_rank.size());
    s.min_rank_ns = UINT64_MAX;
    for (const auto& [rank, ns] : a.by_rank) {
      s.min_rank_ns = std::min(s.min_rank_ns, ns);
      if (s.max_rank < 0 || ns > s.max_rank_ns) {
        s.max_rank_ns = ns;
        s.max_rank = rank;
      }
    }
    s.mean_rank_ns = static_cast<double>(a.ns) / s.ranks;
    double var = 0;
    for (const auto& [rank, ns] : a.by_rank)
      var += std::pow(static_cast<double>(ns) - s.mean_rank_ns, 2);
    s.cov = s.mean_rank_ns > 0 ? std::sqrt(var / s.ranks) / s.mean_rank_ns : 0;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.ns != b.ns ? a.ns > b.ns : std::tie(a.site, a.function) < std::tie(b.site, b.function);
  });
}

}  // namespace parmon::analysis
