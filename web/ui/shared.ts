// What parmon view's UI and the static HTML report (src/analysis/view_html.cc) both draw by: the
// grouping of threads into ranks, which threads are the program's own, and the circle the
// process graph's nodes sit on. Pure functions, no DOM: the UI imports them; the report inlines
// them as the global `parmonShared` (report_entry.ts, bundled by esbuild at build time).

export interface ThreadLike { pid: number; tid: number; rank: number }
export interface ThreadTimes extends ThreadLike { wall_ns: number; compute_ns: number }

// The threads of each rank, by rank; threads outside MPI are left out.
export function byRank<T extends ThreadLike>(threads: T[]): [number, T[]][] {
  const m = new Map<number, T[]>();
  for (const t of threads) {
    if (t.rank < 0) continue;
    if (!m.has(t.rank)) m.set(t.rank, []);
    m.get(t.rank)!.push(t);
  }
  return [...m.entries()].sort((a, b) => a[0] - b[0]);
}

// An MPI job's own threads: each rank's main thread and the other threads of its process that
// compute at least 10% of their life (an OpenMP worker), as the report's queued finding counts
// them. `helpers` are the other threads of the ranks' processes (the MPI library's, which mostly
// sleep), `others` the threads of other processes (the launcher, its daemons). Without ranks
// every thread is the program's.
export function programThreads<T extends ThreadTimes>(threads: T[]): { own: T[]; helpers: T[]; others: T[] } {
  const rankPids = new Set(threads.filter((t) => t.rank >= 0).map((t) => t.pid));
  const own: T[] = [], helpers: T[] = [], others: T[] = [];
  for (const t of threads) {
    if (!rankPids.size || (t.rank >= 0 && t.tid === t.pid) ||
        (rankPids.has(t.pid) && t.wall_ns > 0 && t.compute_ns * 10 >= t.wall_ns)) own.push(t);
    else (rankPids.has(t.pid) ? helpers : others).push(t);
  }
  return { own, helpers, others };
}

// n points on a circle in order, clockwise from the top: a ring of ranks reads as a ring.
export function circle(n: number, cx: number, cy: number, r: number): [number, number][] {
  return Array.from({ length: n }, (_, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, n);
    return [cx + r * Math.cos(a), cy + r * Math.sin(a)] as [number, number];
  });
}

// A value's place on a colour scale, 0..1: linear over [lo, hi], or logarithmic in |value| over
// [floor, maxAbs] (|values| under the floor, zero included, sit at 0). Data views (dataview.ts).
export function scalePosition(v: number, lo: number, hi: number, log: boolean, floor: number): number {
  if (!log) return hi > lo ? (v - lo) / (hi - lo) : 0.5;
  const maxAbs = Math.max(Math.abs(lo), Math.abs(hi));
  if (!(maxAbs > floor) || !(floor > 0)) return 0.5;
  const a = Math.log10(Math.max(Math.abs(v), floor));
  return (a - Math.log10(floor)) / (Math.log10(maxAbs) - Math.log10(floor));
}
// The floor of a logarithmic scale: the smallest non-zero |value|, but no more than 15 decades
// under the largest.
export function logFloor(minAbsNonzero: number, lo: number, hi: number): number {
  const maxAbs = Math.max(Math.abs(lo), Math.abs(hi));
  return Math.max(minAbsNonzero, maxAbs * 1e-15);
}
// Viridis-like stops, dark blue to yellow: readable on white, in grey, and for red-green blindness.
export const VALUE_SCALE: [number, number, number][] =
  [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
