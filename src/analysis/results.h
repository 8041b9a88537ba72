// What the analysis engine finds in a trace: the one data model every view (text, JSON, CSV, HTML,
// diff, scale) renders. Nothing here refers to events: every figure is already aggregated, so the
// size of a Results grows with the number of locations, links, regions and intervals only.
//
// Times are nanoseconds. "Window" is the part of the session being analysed (--from/--to); every
// figure is clipped to it.
#ifndef PARMON_SRC_ANALYSIS_RESULTS_H_
#define PARMON_SRC_ANALYSIS_RESULTS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/omp_results.h"
#include "format/thread_state.h"

namespace parmon::analysis {

// What a location is doing: the state enum shared with the sampler (format/thread_state.h).
// Reports keep the first six states and State::kOther (stopped, other waits, idle, or no data).
using State = format::ThreadState;
constexpr int kStateCount = format::kReportStateCount;
const char* StateName(State s);   // "running", "runnable", ...
const char* StateLabel(State s);  // short column label for text output
using StateTimes = std::array<uint64_t, kStateCount>;

uint64_t Sum(const StateTimes& t);

struct RegionStat {
  std::string name;
  uint64_t count = 0;
  uint64_t inclusive_ns = 0;
  uint64_t exclusive_ns = 0;
};

// One MPI function's calls and time: on one location, or over the run with its spread across
// ranks (each rank's time in it, a rank that never called it counting 0).
struct MpiFunctionStat {
  std::string name;  // "MPI_Send"
  uint64_t calls = 0;
  uint64_t ns = 0;
  uint64_t min_rank_ns = 0, max_rank_ns = 0;  // over ranks (run profile only)
  double mean_rank_ns = 0;
  int32_t max_rank = -1;
};

// Calls of one MPI function from one place in the program (trace mode records the return
// address; the report resolves it with the program's DWARF line table).
struct MpiCallSiteStat {
  std::string site;      // where, resolved: "mpi_truth.c:70 (main)"; else "0x1234 /path/module"
  std::string function;  // "MPI_Send"
  uint64_t calls = 0;
  uint64_t ns = 0;
  // Over the ranks that called it here (run profile only).
  uint32_t ranks = 0;
  uint64_t min_rank_ns = 0, max_rank_ns = 0;
  double mean_rank_ns = 0, cov = 0;  // cov: standard deviation / mean of the ranks' times
  int32_t max_rank = -1;
};

struct CallFamilyStat {
  std::string family;  // "p2p", "collective", "wait", "one-sided", "io", "init", "other" (MPI)
  uint64_t calls = 0;
  uint64_t ns = 0;
};

// Identities: results are compared by these numbers; the strings beside them are for output.
enum class LocationKind : uint8_t { kThread, kCpu };
enum class LinkKind : uint8_t { kMpi, kChannel };

struct LocationResult {
  uint32_t id = 0;
  LocationKind type = LocationKind::kThread;
  std::string kind;          // "thread" or "cpu" (output)
  bool main_thread = false;  // a rank's main thread (the location its MPI links stand for)
  bool sampled = false;      // state_source == "sampled"
  uint32_t pid = 0;
  uint32_t tid = 0;
  int32_t rank = -1;  // MPI world rank, -1 when none
  std::string name;   // thread name, or "cpu3"
  std::string label;  // how reports name it: "rank 2", "pid 41/tid 43 worker", "cpu 1"
  uint64_t first_ts = 0, last_ts = 0;
  uint64_t wall_ns = 0;
  uint64_t cpu_ns = 0;
  StateTimes states{};
  // Where the state split came from: "sampled" (the /proc sampler or context switches) or
  // "inferred" (instrumented calls only: time in no call counts as running).
  std::string state_source = "inferred";
  uint64_t events = 0;
  uint64_t lost_events = 0;
  uint64_t messages_sent = 0, bytes_sent = 0;
  uint64_t messages_received = 0, bytes_received = 0;
  // The MPI messages among those; the rest are writes and reads on POSIX channels (pipes,
  // sockets, the program's stdout).
  uint64_t mpi_messages_sent = 0, mpi_bytes_sent = 0;
  uint64_t mpi_messages_received = 0, mpi_bytes_received = 0;
  // Time in MPI calls other than MPI_Init/Init_thread/Finalize (communication and the rest);
  // start-up (MPI_Init/Init_thread) and shut-down (MPI_Finalize) are apart and in no state.
  uint64_t mpi_ns = 0;
  uint64_t mpi_calls = 0;
  uint64_t mpi_startup_ns = 0, mpi_shutdown_ns = 0;
  uint64_t mpi_init_ns = 0;  // start-up + shut-down
  // What the kernel saw the thread do while inside MPI calls (polling = running, queued,
  // sleeping, locks, ...): detail of the comm-wait state, which holds all of mpi_ns.
  StateTimes mpi_kernel_states{};
  std::vector<CallFamilyStat> mpi_families;     // by time, descending
  std::vector<MpiFunctionStat> mpi_functions;   // by time, descending (not start-up, shut-down)
  std::vector<MpiCallSiteStat> mpi_call_sites;  // unresolved sites; by time, descending
  std::vector<RegionStat> top_regions;          // by inclusive time, descending
  // Wait states (time lost waiting for a partner), MPI and channels.
  uint64_t late_sender_ns = 0;
  uint64_t late_receiver_ns = 0;
  uint64_t barrier_wait_ns = 0;
  uint64_t collective_wait_ns = 0;  // N-to-N collectives other than barriers
  uint64_t compute_ns = 0;          // wall time outside communication and waits
  // Time in the program's recorded lock calls (pthread mutex, rwlock, spinlock, condition
  // variable, barrier, semaphore waits): of the lock-wait state, the part the program asked for;
  // the rest is futex waits outside any such call (an OpenMP runtime's barriers, for instance).
  uint64_t lock_calls_ns = 0;
  // Time parmon held the thread while its ring was full (--overflow block): in no state of the
  // program's (it came out of the waits the kernel saw, or of running for inferred states).
  uint64_t parmon_held_ns = 0;
  uint64_t critical_path_ns = 0;  // this location's share of the critical path
};

// One direction of communication between two endpoints (ranks, or thread/process locations for
// POSIX channels and locks).
struct LinkResult {
  LinkKind type = LinkKind::kMpi;
  std::string kind;   // "mpi" or "channel" (output)
  int64_t from = -1;  // rank for mpi, location id for channels
  int64_t to = -1;
  // The locations at either end (for mpi the ranks' main threads); -1 when not a recorded one.
  int64_t from_location = -1, to_location = -1;
  std::string from_label, to_label;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t time_ns = 0;           // time in the send and receive calls of this link's messages
  uint64_t wait_ns = 0;           // of which waiting for the partner
  uint64_t transfer_ns = 0;       // of which moving data
  uint64_t sender_wait_ns = 0;    // the sender blocked (late receiver, full pipe)
  uint64_t receiver_wait_ns = 0;  // the receiver blocked (late sender, empty pipe)
  // Messages (for channels: reads that returned data) sent only after the sender had heard,
  // through any chain of messages, of the receiver's latest send: they closed a loop
  // (analysis/loop_clocks.h).
  uint64_t closed_loop_messages = 0;
  // Channel links: the channel (pipe:<inode>, sock:...); a writer's links to the several readers
  // of one channel share it, each carrying that reader's share of the bytes.
  std::string channel;
};

// One wait-state finding per (location, call) pair: where the time was lost.
enum class WaitPattern : uint8_t {
  kLateSender,
  kLateReceiver,
  kBarrier,      // wait at barrier
  kNToN,         // wait at N-to-N
  kBlockedSend,  // a channel write blocked on a full channel
  kBlockedReceive,
};
// "late sender", "late receiver", "wait at barrier", "wait at N-to-N", "blocked send", ...
const char* WaitPatternName(WaitPattern p);

struct WaitStateResult {
  WaitPattern kind = WaitPattern::kLateSender;
  std::string pattern;  // WaitPatternName(kind) (output)
  uint32_t location = 0;
  std::string location_label;
  std::string call;  // "MPI_Recv", "MPI_Barrier", "read", ...
  uint64_t instances = 0;
  uint64_t ns = 0;
};

struct IntervalSeries {
  uint64_t interval_ns = 0;
  uint64_t window_start = 0;  // session-clock ns of the first interval's start
  size_t count = 0;
  // [location index in Results::locations][interval]: ns per state.
  std::vector<std::vector<StateTimes>> location_states;
  // [location index][interval]: busy fraction 0..1 (running, or CPU busy for cpu locations).
  std::vector<std::vector<double>> location_utilisation;
  // [link index in Results::links][interval]: fraction of the interval the link was in use
  // (wait + transfer, by the sender and the receiver at most once each).
  std::vector<std::vector<double>> link_utilisation;
  std::vector<std::vector<uint64_t>> link_bytes;
  // Per interval: spread of utilisation across thread locations (max - min), the imbalance.
  std::vector<double> imbalance;
  // Mean and standard deviation over the window, per location and per link.
  std::vector<double> location_mean, location_stddev;
  std::vector<double> link_mean, link_stddev;
  std::vector<size_t> most_imbalanced;  // interval indexes, worst first (up to 5)
};

struct LoadImbalance {
  std::string over;  // "ranks" or "threads"
  size_t members = 0;
  uint64_t max_compute_ns = 0;
  uint64_t mean_compute_ns = 0;
  uint64_t min_compute_ns = 0;
  std::string max_label;
  std::string min_label;
  double percent = 0;  // (max - mean) / max * 100: time the others wait for the slowest
};

struct CriticalPath {
  uint64_t length_ns = 0;  // computation along the longest chain through messages
  uint64_t wall_ns = 0;
  std::vector<std::pair<std::string, uint64_t>> shares;  // label, ns on the path; descending
  bool shares_kept = true;  // false beyond 64 locations: only the length is known
};

// The CPUs' time against the program's threads, so that a user can reconcile the threads'
// queued time with the CPUs' busy share (issue 12 item 10): threads queue when more of them want
// a CPU than there are CPUs free of other work and of the hypervisor (steal), and, for a moment
// after each wake-up, even beside an idle CPU.
struct CpuAccount {
  uint32_t cpus = 0;                   // CPU locations sampled
  uint64_t capacity_ns = 0;            // their sampled time (about cpus x window)
  uint64_t busy_ns = 0;                // /proc/stat: user, nice, system, irq, softirq
  uint64_t steal_ns = 0;               // taken by the hypervisor
  uint64_t idle_ns = 0;                // idle and iowait
  uint64_t program_running_ns = 0;     // the program's sampled threads, summed
  uint64_t program_queued_ns = 0;      // the same threads' queued (runnable) time
  uint64_t other_work_ns = 0;          // busy less the program's running: other processes, parmon
  double runnable_threads = 0;         // (running + queued) / window: threads wanting a CPU
  uint64_t queued_beside_idle_ns = 0;  // queued time in intervals where CPU time was not busy,
                                       // up to that time: wake-up delays, short bursts
};

// A process that died of a signal (its FatalSignal event), and what the other ranks (or
// processes) did from then on.
struct ProcessDeath {
  uint32_t pid = 0;
  int32_t rank = -1;
  uint32_t location = 0;  // the thread that took the signal
  std::string label;      // "rank 1", or the thread's label
  int32_t signal = 0;
  std::string signal_name;     // "SIGSEGV"
  std::string signal_meaning;  // "invalid memory access"
  int64_t code = 0;            // si_code
  uint32_t sender = 0;         // pid of the process that sent it (0: the kernel, a fault)
  // Crashed: a fault, or a signal it sent itself (abort, raise); else killed by another process
  // (a launcher tearing the job down).
  bool crashed = false;
  uint64_t ts = 0;  // session clock
  struct After {
    uint32_t location = 0;
    std::string label;
    std::string mpi_call;  // the MPI call it was in at the death ("" if none)
    uint64_t call_since = 0;
    uint64_t until = 0;      // its last event
    int32_t end_signal = 0;  // the signal that ended it, 0 if none recorded
    std::string end_signal_name;
  };
  std::vector<After> others;  // the other ranks' main threads (or other processes' threads)
};

struct Finding {
  std::string id;        // stable key: "link-wait", "queued", "imbalance", ...
  std::string text;      // one sentence in plain words
  std::string evidence;  // the figures it rests on
  // What fixing it could save of the run's wall time (never more than the wall time): findings
  // are ranked by it. thread_time_ns is the time of the threads involved, summed, which can be
  // several times the wall time (four threads queued for a second each: 4 s of it).
  uint64_t time_at_stake_ns = 0;
  uint64_t thread_time_ns = 0;
  double percent_of_run = 0;          // thread time / (wall time x locations involved)
  std::vector<std::string> subjects;  // labels of the locations/links it names
};

// How one rank's recorder clock stood against rank 0's (a session of one file per rank): the
// offset (its time minus rank 0's) at the first and last MpiClockSync epoch. 0 means the same
// clock (an offset within its measurement's uncertainty is taken as 0).
struct ClockOffset {
  int32_t rank = -1;
  int64_t offset_ns = 0;
  int64_t last_offset_ns = 0;
  uint32_t epochs = 0;
};

struct Summary {
  std::string file;
  std::string command;
  std::string host;
  std::string format_version;
  bool closed_cleanly = true;
  uint64_t session_start = 0, session_end = 0;
  uint64_t window_start = 0, window_end = 0;  // session-clock ns
  uint64_t duration_ns = 0;                   // of the window
  int exit_code = -1;
  uint32_t processes = 0, threads = 0, ranks = 0, cpus = 0;
  uint64_t events = 0;
  uint64_t lost_events = 0;
  std::map<uint32_t, uint64_t> lost_by_location;
  uint64_t unattached_lost_events = 0;
  uint64_t overwritten_events = 0;
  uint64_t damaged_events = 0;
  // `parmon ctl pause`: time of the window the session was paused (not loss, no program state).
  uint64_t paused_ns = 0;
  uint32_t pauses = 0;
  // A trace not closed: every event before this (session-clock ns) is in it, what came after is
  // unknown; 0 when it holds no watermark.
  uint64_t covered_until = 0;
  std::vector<std::string> problems;
  // The monitor's own cost (overhead.cc): CPU of the recorder process, and the time parmon took in
  // the program's threads: libparmon's events (events x cost per event) and the kernel's
  // context-switch records (records x cost per record; a switch is a switch-out and a switch-in).
  uint64_t recorder_cpu_ns = 0;
  uint64_t calibration_cpu_ns = 0;  // of recorder_cpu_ns, measuring the switch-record cost after
                                    // the program ended
  uint64_t program_cpu_ns = 0;
  uint64_t in_thread_overhead_ns = 0;  // events + switch records
  uint64_t in_thread_events_ns = 0;
  uint64_t in_thread_switches_ns = 0;
  uint64_t parmon_held_ns = 0;  // threads held on full rings (--overflow block), summed
  double event_cost_ns = 0;
  std::string event_cost_source;  // "measured" (session key) or "estimate"
  uint64_t switches = 0;          // the program's threads' context switches in the window
  double switch_record_cost_ns = 0;
  std::string switch_cost_source;  // "measured" (by the recorder), "estimate" or "" (no switches)
  // What recording cost the program, as a share of the CPU time the program would have used
  // without it: (in-thread time + the recorder's CPU during the run x the share of the CPUs'
  // time that was busy, i.e. how much of it took a CPU from someone) / (program CPU - in-thread).
  // 0 when the trace does not say the program's CPU time.
  double estimated_slowdown = 0;
  bool has_sched = false;  // sampler or context-switch data present
  bool has_comm = false;   // MPI or channel events present
  // The switch-record budget of `parmon record` stopped the context-switch records (trace mode,
  // --switch-budget; switch_stops.cc): one per recorder that did, by time. After one, the
  // threads it recorded are booked from the sampler's /proc samples, as with --no-switches.
  struct SwitchStop {
    uint64_t ts = 0;  // session clock
    uint32_t pid = 0;
    int32_t rank = -1;  // the recorder's rank in a per-rank session
    uint64_t records = 0;
    double rate_per_s = 0;  // in the window that went over the budget
    double share = 0;       // of the program's CPU time, in that window
    double budget = 0;
    double cost_ns = 0;  // per record, as the recorder assumed
  };
  std::vector<SwitchStop> switch_stops;
  // Ranks of other recorders whose clocks were measured, and whether any offset was applied.
  std::vector<ClockOffset> clock_offsets;
  bool clocks_aligned = false;
};

// What an mpiP user reads first: the MPI share of each rank's run (its time outside MPI
// start-up and shut-down), and the time per MPI function with its spread across ranks.
struct MpiProfile {
  uint32_t ranks = 0;
  uint64_t mpi_ns = 0, run_ns = 0;  // summed over ranks
  int32_t most_rank = -1;           // the rank with the largest MPI share
  uint64_t most_mpi_ns = 0, most_run_ns = 0;
  std::vector<MpiFunctionStat> functions;  // by time, descending
  // MPI_Init/Init_thread and MPI_Finalize: not in the MPI time, with their spread over ranks.
  MpiFunctionStat startup, shutdown;
  // Per call site and function over the ranks (trace mode), by time, descending.
  std::vector<MpiCallSiteStat> call_sites;
};

struct Results {
  Summary summary;
  std::vector<LocationResult> locations;  // threads first (by pid, tid), then cpus
  std::vector<LinkResult> links;          // by time, descending
  std::vector<WaitStateResult> wait_states;
  IntervalSeries intervals;
  LoadImbalance imbalance;
  CriticalPath critical_path;
  CpuAccount cpu_account;
  MpiProfile mpi;
  OmpProfile omp;                    // OpenMP through OMPT (omp_analyzer.h)
  std::vector<ProcessDeath> deaths;  // by time
  std::vector<Finding> findings;     // ranked, most wall time to save first

  // Index of a location id in locations, or -1.
  int LocationIndex(uint32_t id) const;
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_RESULTS_H_
