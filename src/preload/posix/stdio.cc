// libparmon_posix's view of stdio writes: what fwrite, fputs, printf, puts, putc, fflush, the
// flush at exit and every other stdio path hand to the kernel, recorded as write(2) is.
//
// glibc's stdio buffers in the FILE and passes the bytes to the kernel through one function,
// the `__write` slot of the FILE's jump table (`_IO_new_file_write`, exported as
// `_IO_file_write`), which loops on glibc's internal `__write` until the buffer is out; the
// interposable `write` symbol never sees those bytes. Wrapping the dozens of stdio entry points
// would have to guess from buffer pointers what each call flushed, and would miss the flush at
// exit (`_IO_cleanup`, after every destructor) and inline `putc_unlocked`'s overflow. Instead,
// once at load, the `__write` slots of glibc's own jump tables (the section
// `__libc_IO_vtables`: plain files, wide streams, popen's streams) that hold `_IO_file_write`
// are pointed at StdioWrite below, which calls `_IO_file_write` and records one ChanWrite
// (func "stdio_write") with what it returned: exactly the bytes the kernel took, once per flush,
// never also as a `write` (glibc's internal path does not go through the wrapper). The jump
// tables themselves stay where they are, so glibc's vtable check (a FILE's table must lie in
// that section) still passes. The section is read-only after relocation (RELRO): it is made
// writable for the few stores and read-only again.
//
// Safety: nothing is patched unless the section is found in libc's section headers, contains
// `_IO_file_jumps`, and a slot holding `_IO_file_write` is preceded by the two null dummy
// slots that begin every jump table (the layout of struct _IO_jump_t, glibc 2.x). Otherwise, or
// when mprotect refuses, stdio writes are simply not recorded (docs/comm.md). Streams made with
// fopencookie have their own functions and are not affected; a cookie that calls write(2) is
// recorded by write's wrapper.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/common/preload.h"
#include "preload/posix/posix_record.h"

namespace parmon::preload::posix {
namespace {

using FileWrite = ssize_t (*)(FILE*, const void*, ssize_t);
FileWrite g_file_write = nullptr;

ssize_t StdioWrite(FILE* f, const void* data, ssize_t n) {
  if (!On())
    return g_file_write(f, data, n);
  uint64_t begin = Now();
  ssize_t rc = g_file_write(f, data, n);
  RecordIo(Kind::kChanWrite, kStdioWrite, f->_fileno, rc, begin);
  return rc;
}

// pread with raw system calls (our own wrappers must not see them).
bool ReadAt(int fd, void* buf, size_t n, uint64_t off) {
  return syscall(SYS_pread64, fd, buf, n, static_cast<off_t>(off)) == static_cast<long>(n);
}

// [start, start + size) of libc's __libc_IO_vtables section in memory, from the section headers
// of the file it was loaded from.
bool FindVtables(const char* file, uintptr_t base, uintptr_t* start, size_t* size) {
  long fd = syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool found = false;
  Elf64_Ehdr eh;
  if (ReadAt(static_cast<int>(fd), &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
      eh.e_shnum > 0 && eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum) {
    Elf64_Shdr names;
    if (ReadAt(static_cast<int>(fd), &names, sizeof names,
               eh.e_shoff + uint64_t{eh.e_shstrndx} * sizeof(Elf64_Shdr))) {
      for (unsigned i = 0; i < eh.e_shnum && !found; ++i) {
        Elf64_Shdr sh;
        char name[32] = {};
        if (!ReadAt(static_cast<int>(fd), &sh, sizeof sh, eh.e_shoff + uint64_t{i} * sizeof sh))
          break;
        if (sh.sh_name >= names.sh_size)
          continue;
        size_t want = sizeof "__libc_IO_vtables";
        if (names.sh_size - sh.sh_name < want)
          continue;
        if (!ReadAt(static_cast<int>(fd), name, want, names.sh_offset + sh.sh_name))
          continue;
        if (strcmp(name, "__libc_IO_vtables") == 0) {
          *start = base + sh.sh_addr;
          *size = sh.sh_size;
          found = true;
        }
      }
    }
  }
  syscall(SYS_close, fd);
  return found;
}

// Whether [lo, hi) lies in the part of the object loaded at `base` that the dynamic linker made
// read-only after relocation (PT_GNU_RELRO, its end rounded down to a page as ld.so does): then
// PROT_READ is what it had and what it gets back.
struct RelroQuery {
  uintptr_t base, lo, hi, page;
  bool inside;
};
int CheckRelro(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<RelroQuery*>(data);
  if (info->dlpi_addr != q->base)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_GNU_RELRO)
      continue;
    uintptr_t from = (q->base + ph.p_vaddr) & ~(q->page - 1);
    uintptr_t to = (q->base + ph.p_vaddr + ph.p_memsz) & ~(q->page - 1);
    if (q->lo >= from && q->hi <= to)
      q->inside = true;
  }
  return 1;
}

// The __write slot's index in struct _IO_jump_t: two dummies, finish, overflow, underflow,
// uflow, pbackfail, xsputn, xsgetn, seekoff, seekpos, setbuf, sync, doallocate, read, write.
constexpr size_t kWriteSlot = 15;

__attribute__((constructor)) void HookStdio() {
  // Our own calls (dlsym, dladdr) must not be recorded.
  const int was = t_in_wrapper;
  t_in_wrapper = 1;
  void* jumps = dlsym(RTLD_DEFAULT, "_IO_file_jumps");
  void* write_fn = dlsym(RTLD_DEFAULT, "_IO_file_write");
  Dl_info info{};
  uintptr_t start = 0;
  size_t size = 0;
  if (jumps != nullptr && write_fn != nullptr && dladdr(jumps, &info) != 0 &&
      info.dli_fname != nullptr &&
      FindVtables(info.dli_fname, reinterpret_cast<uintptr_t>(info.dli_fbase), &start, &size) &&
      reinterpret_cast<uintptr_t>(jumps) >= start &&
      reinterpret_cast<uintptr_t>(jumps) < start + size && start % sizeof(void*) == 0) {
    g_file_write = reinterpret_cast<FileWrite>(write_fn);
    const long page = sysconf(_SC_PAGESIZE);
    const uintptr_t lo = start & ~static_cast<uintptr_t>(page - 1);
    const uintptr_t hi = (start + size + page - 1) & ~static_cast<uintptr_t>(page - 1);
    RelroQuery q{reinterpret_cast<uintptr_t>(info.dli_fbase), lo, hi, static_cast<uintptr_t>(page),
                 false};
    dl_iterate_phdr(CheckRelro, &q);
    if (q.inside && syscall(SYS_mprotect, lo, hi - lo, PROT_READ | PROT_WRITE) == 0) {
      auto* slot = reinterpret_cast<void**>(start);
      const size_t n = size / sizeof(void*);
      for (size_t i = kWriteSlot; i < n; ++i)
        if (slot[i] == write_fn && slot[i - kWriteSlot] == nullptr &&
            slot[i - kWriteSlot + 1] == nullptr)
          __atomic_store_n(&slot[i], reinterpret_cast<void*>(&StdioWrite), __ATOMIC_RELEASE);
      syscall(SYS_mprotect, lo, hi - lo, PROT_READ);
    }
  }
  t_in_wrapper = was;
}

}  // namespace
}  // namespace parmon::preload::posix
