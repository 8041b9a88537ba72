// Chunk streams and sinks: a trace written to a pipe, read from a pipe cut at many byte
// positions, a growing file read with Refresh() and WATERMARK chunks, and chunk headers whose
// counts and ids are larger than their bytes can hold.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/chunk_stream.h"
#include "format/reader.h"
#include "format/writer.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::format {
namespace {

class Dir {
 public:
  Dir() {
    char tmpl[] = "/tmp/parmon-stream-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~Dir() { std::system(("rm -rf " + path_).c_str()); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<char> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const char* data, size_t n, bool append = false) {
  std::ofstream out(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  out.write(data, static_cast<std::streamsize>(n));
}

Event Def(uint32_t location) {
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefLocation);
  d.nargs = 4;
  d.args[0] = location;
  d.args[1] = 1;
  d.args[2] = 100;
  d.args[3] = 100u + location;
  d.payload = "thread";
  return d;
}

// Streams 1..streams, `chunks` chunks of `per_chunk` events each, a watermark after every round.
void WriteRounds(TraceWriter* w, int streams, int chunks, int per_chunk, int first_round = 0) {
  for (int c = first_round; c < first_round + chunks; ++c) {
    uint64_t ts = 0;
    for (int s = 1; s <= streams; ++s) {
      StreamEncoder enc(static_cast<uint32_t>(s), Source::kRuntime);
      for (int i = 0; i < per_chunk; ++i) {
        ts = 1000 + static_cast<uint64_t>(c * per_chunk + i) * 10 + static_cast<uint64_t>(s);
        enc.AppendOneArg(static_cast<uint16_t>(i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter), ts,
                         1);
      }
      ASSERT_TRUE(w->Flush(&enc).ok());
    }
    ASSERT_TRUE(w->WriteWatermark(ts + 1).ok());
  }
}

std::unique_ptr<TraceWriter> NewTrace(std::unique_ptr<ChunkSink> sink, int streams) {
  auto w = TraceWriter::Create(std::move(sink));
  EXPECT_TRUE(w.ok()) << w.status().message();
  EXPECT_TRUE((*w)->WriteSession({{"command", "test"}, {"start_ts", "1000"}}).ok());
  StreamEncoder defs(0, Source::kDefinitions);
  for (int s = 1; s <= streams; ++s)
    defs.Append(Def(static_cast<uint32_t>(s)));
  EXPECT_TRUE((*w)->Flush(&defs).ok());
  return std::move(*w);
}

std::unique_ptr<TraceWriter> NewFileTrace(const std::string& path, int streams) {
  auto sink = OpenFileSink(path);
  EXPECT_TRUE(sink.ok()) << sink.status().message();
  return NewTrace(std::move(*sink), streams);
}

void WriteFinishedTrace(const std::string& path, int streams, int rounds, int per_chunk) {
  auto w = NewFileTrace(path, streams);
  WriteRounds(w.get(), streams, rounds, per_chunk);
  EXPECT_TRUE(w->Finish().ok());
}

uint64_t CountEvents(const TraceReader& r) {
  auto session = model::Session::Over(r);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok())
    return 0;
  model::Merge cur(**session);
  Event e;
  uint64_t n = 0;
  while (cur.Next(&e))
    ++n;
  return n;
}

// Reads bytes through a pipe: a thread writes them, the reader opens /dev/fd/N (a FIFO).
StatusOr<std::unique_ptr<TraceReader>> OpenThroughPipe(const char* data, size_t n) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::thread writer([&] {
    size_t done = 0;
    while (done < n) {
      ssize_t k = write(p[1], data + done, n - done);
      if (k <= 0)
        break;
      done += static_cast<size_t>(k);
    }
    close(p[1]);
  });
  auto r = TraceReader::Open("/dev/fd/" + std::to_string(p[0]));
  writer.join();
  close(p[0]);
  return r;
}

struct ChunkSpan {
  uint64_t begin, end;
  ChunkHeader h;
};

std::vector<ChunkSpan> Chunks(const std::vector<char>& data) {
  std::vector<ChunkSpan> out;
  uint64_t off = sizeof(FileHeader);
  while (off + sizeof(ChunkHeader) <= data.size()) {
    ChunkHeader h;
    std::memcpy(&h, data.data() + off, sizeof h);
    if (h.magic != kChunkMagic)
      break;
    out.push_back({off, off + sizeof h + h.stored_size, h});
    off += sizeof h + h.stored_size;
  }
  return out;
}

TEST(ChunkStream, FdSinkWritesAPipeThatReadsLikeTheFile) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::thread writer([&] {
    auto w = NewTrace(MakeFdSink(p[1], "pipe", true), 3);
    WriteRounds(w.get(), 3, 5, 100);
    ASSERT_TRUE(w->Finish().ok());
  });
  auto r = TraceReader::Open("/dev/fd/" + std::to_string(p[0]));
  writer.join();
  close(p[0]);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_TRUE((*r)->problems().empty()) << (*r)->problems()[0].message;
  EXPECT_EQ((*r)->total_events(), 1500u);
  EXPECT_EQ(CountEvents(**r), 1500u);
  EXPECT_EQ((*r)->definitions().locations.size(), 3u);
  EXPECT_EQ((*r)->complete_until(), UINT64_MAX);
}

TEST(ChunkStream, SocketSinkWhosePeerLeftIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  close(sv[1]);
  auto w = TraceWriter::Create(MakeFdSink(sv[0], "socket", true));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("writing socket failed"), std::string::npos)
      << w.status().message();
}

TEST(ChunkStream, StandardInput) {
  Dir dir;
  std::string path = dir.File("t.ptrace");
  WriteFinishedTrace(path, 2, 3, 50);
  int saved = dup(STDIN_FILENO);
  int in = open(path.c_str(), O_RDONLY);
  ASSERT_GE(in, 0);
  // A regular file on stdin is read in place; through a pipe it is spooled. Both: the same.
  dup2(in, STDIN_FILENO);
  close(in);
  auto r = TraceReader::Open("-");
  dup2(saved, STDIN_FILENO);
  close(saved);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->total_events(), 300u);
  EXPECT_TRUE((*r)->closed_cleanly());
}

TEST(ChunkStream, PipeCutAnywhereKeepsEveryIntactChunk) {
  Dir dir;
  std::string path = dir.File("t.ptrace");
  WriteFinishedTrace(path, 3, 4, 200);
  const std::vector<char> data = Slurp(path);
  const auto chunks = Chunks(data);
  ASSERT_GT(chunks.size(), 15u);
  std::set<uint64_t> cuts;
  for (const auto& c : chunks) {
    for (uint64_t at : {c.begin - 1, c.begin, c.begin + 1, c.begin + 30, c.begin + 64,
                        (c.begin + c.end) / 2, c.end - 1})
      cuts.insert(at);
  }
  cuts.insert(data.size() - 8);
  cuts.insert(data.size());
  for (uint64_t cut : cuts) {
    if (cut < sizeof(FileHeader) || cut > data.size())
      continue;
    uint64_t expected = 0;
    for (const auto& c : chunks)
      if (c.end <= cut && c.h.type == static_cast<uint16_t>(ChunkType::kEvents) &&
          c.h.source != static_cast<uint8_t>(Source::kDefinitions))
        expected += c.h.event_count;
    auto r = OpenThroughPipe(data.data(), cut);
    ASSERT_TRUE(r.ok()) << "cut at " << cut << ": " << r.status().message();
    EXPECT_EQ((*r)->total_events(), expected) << "cut at " << cut;
    EXPECT_EQ(CountEvents(**r), expected) << "cut at " << cut;
    if (cut < chunks.back().end) {
      // The rest is described, as the open end of the stream, never as damage inside it.
      ASSERT_FALSE((*r)->problems().empty()) << "cut at " << cut;
      EXPECT_LE((*r)->problems().size(), 2u) << "cut at " << cut;
      for (const auto& p : (*r)->problems())
        EXPECT_TRUE(p.tail) << "cut at " << cut << ": " << p.message;
      EXPECT_FALSE((*r)->closed_cleanly());
    } else if (cut == data.size()) {
      EXPECT_TRUE((*r)->problems().empty()) << (*r)->problems()[0].message;
    }
  }
}

TEST(ChunkStream, GrowingFileRefreshAndWatermark) {
  Dir dir;
  std::string path = dir.File("t.ptrace");
  auto w = NewFileTrace(path, 2);
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->complete_until(), 0u);
  EXPECT_EQ((*r)->total_events(), 0u);
  WriteRounds(w.get(), 2, 2, 100);
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_EQ((*r)->total_events(), 400u);
  EXPECT_EQ(CountEvents(**r), 400u);
  // Round 1's last event of stream 2 is at 1000 + 199*10 + 2.
  EXPECT_EQ((*r)->complete_until(), 1000u + 199 * 10 + 2 + 1);
  ASSERT_EQ((*r)->problems().size(), 1u);
  EXPECT_TRUE((*r)->problems()[0].tail);
  EXPECT_NE((*r)->problems()[0].message.find("read up to byte"), std::string::npos);
  WriteRounds(w.get(), 2, 1, 100, 2);
  ASSERT_TRUE(w->Finish().ok());
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_TRUE((*r)->problems().empty()) << (*r)->problems()[0].message;
  EXPECT_EQ((*r)->total_events(), 600u);
  EXPECT_EQ(CountEvents(**r), 600u);
  EXPECT_EQ((*r)->complete_until(), UINT64_MAX);
}

TEST(ChunkStream, PartialChunkAtTheEndIsReadOnceWhole) {
  Dir dir;
  std::string whole = dir.File("whole.ptrace"), growing = dir.File("growing.ptrace");
  WriteFinishedTrace(whole, 2, 3, 100);
  const std::vector<char> data = Slurp(whole);
  const auto chunks = Chunks(data);
  const uint64_t cut = chunks[chunks.size() - 4].begin + 70;  // inside a chunk
  Spit(growing, data.data(), cut);
  auto r = TraceReader::Open(growing);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const uint64_t before = (*r)->total_events();
  for (const auto& p : (*r)->problems())
    EXPECT_TRUE(p.tail) << p.message;
  Spit(growing, data.data() + cut, data.size() - cut, true);
  ASSERT_TRUE((*r)->Refresh().ok());
  EXPECT_GT((*r)->total_events(), before);
  EXPECT_EQ((*r)->total_events(), 600u);
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_TRUE((*r)->problems().empty()) << (*r)->problems()[0].message;
}

// issue 13 item 3: counts and ids read from a header never size anything past what the bytes
// hold. Each crafted chunk has a valid checksum, so only the sanity checks can catch it.
TEST(ChunkStream, CraftedCountsAndIdsAreDamageNotAllocations) {
  Dir dir;
  std::string path = dir.File("t.ptrace");
  {
    auto w = NewFileTrace(path, 1);
    StreamEncoder defs(0, Source::kDefinitions);
    defs.Append(Def(0xFFFFFFFEu));
    ASSERT_TRUE(w->Flush(&defs).ok());
    WriteRounds(w.get(), 1, 1, 10);
    const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_TRUE(w->WriteEncoded(1, Source::kRuntime, 5000, 5000, 0x80000000u, bytes, 8).ok());
    ASSERT_TRUE(w->WriteEncoded(0xFFFFFFFFu, Source::kRuntime, 5000, 5000, 1, bytes, 8).ok());
    ASSERT_TRUE(w->WriteEncoded(0xFFFFFFFEu, Source::kRuntime, 5000, 5000, 1, bytes, 8).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->total_events(), 10u);
  EXPECT_EQ(CountEvents(**r), 10u);
  ASSERT_EQ((*r)->streams().size(), 1u);
  EXPECT_EQ((*r)->definitions().locations.count(0xFFFFFFFEu), 0u);
  int declares = 0, location = 0;
  for (const auto& p : (*r)->problems()) {
    EXPECT_FALSE(p.tail);
    declares += p.message.find("declares 2147483648 events in") != std::string::npos;
    location += p.message.find("above the largest location id") != std::string::npos;
  }
  EXPECT_EQ(declares, 1);
  EXPECT_EQ(location, 2);
}

TEST(ChunkStream, NotATraceOnAPipeIsOneSentence) {
  const std::string junk(1000, 'z');
  auto r = OpenThroughPipe(junk.data(), junk.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a parmon trace"), std::string::npos);
}

}  // namespace
}  // namespace parmon::format

namespace parmon::format {
namespace {

// Feeds bytes through a pipe into a ChunkStream; returns the chunks it yields.
std::vector<StreamChunk> ReadStream(const std::vector<char>& data,
                                    size_t n,
                                    std::vector<Problem>* problems) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::thread writer([&] {
    for (size_t done = 0; done < n;) {
      ssize_t k = write(p[1], data.data() + done, std::min<size_t>(n - done, 777));
      if (k <= 0)
        break;
      done += static_cast<size_t>(k);
    }
    close(p[1]);
  });
  std::vector<StreamChunk> out;
  ChunkStream stream(p[0], "pipe");
  FileHeader fh;
  if (stream.ReadFileHeader(&fh).ok()) {
    StreamChunk c;
    while (stream.Next(&c))
      out.push_back(c);
  }
  writer.join();
  close(p[0]);
  *problems = stream.problems();
  return out;
}

TEST(ChunkStream, SequentialChunksFromAPipeWithResync) {
  Dir dir;
  std::string path = dir.File("t.ptrace");
  WriteFinishedTrace(path, 2, 4, 100);
  std::vector<char> data = Slurp(path);
  const auto chunks = Chunks(data);
  std::vector<Problem> problems;
  auto got = ReadStream(data, data.size(), &problems);
  ASSERT_EQ(got.size(), chunks.size());
  EXPECT_TRUE(problems.empty()) << problems[0].message;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i].offset, chunks[i].begin);

  // A damaged header (resynchronised) and a damaged payload: those two chunks only are lost.
  data[chunks[3].begin + 20] ^= 0x40;
  data[chunks[6].end - 1] ^= 0x01;
  got = ReadStream(data, data.size(), &problems);
  EXPECT_EQ(got.size(), chunks.size() - 2);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(
      problems[0].message.find("reading resumes at offset " + std::to_string(chunks[4].begin)),
      std::string::npos)
      << problems[0].message;
  EXPECT_NE(problems[1].message.find("payload checksum"), std::string::npos);

  // Cut anywhere: every whole chunk before the cut, one tail problem about the rest.
  data = Slurp(path);
  for (const auto& c : chunks) {
    for (uint64_t cut : {c.begin + 1, c.begin + 64, c.end - 1}) {
      got = ReadStream(data, cut, &problems);
      size_t whole = 0;
      bool boundary = false;  // a WATERMARK chunk is a header only
      for (const auto& k : chunks) {
        whole += k.end <= cut;
        boundary = boundary || k.end == cut;
      }
      EXPECT_EQ(got.size(), whole) << "cut at " << cut;
      ASSERT_EQ(problems.size(), boundary ? 0u : 1u) << "cut at " << cut;
      if (!boundary) {
        EXPECT_TRUE(problems[0].tail);
      }
    }
  }
}

}  // namespace
}  // namespace parmon::format
