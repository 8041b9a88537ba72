// The JSON answers of parmon view's API (docs/http-api.md) as TypeScript types, and the fetches.
// Times are ns from the session start.

export interface RowInfo {
  id: number; label: string; name: string; pid: number; tid: number; rank: number;
  kind: string; main_thread: boolean; state_source: string; events: number;
  messages_sent: number; messages_received: number; slices: number; first: number; last: number;
}
export interface Session {
  file: string; command: string; start: number; end: number; states: string[];
  slice_kinds: string[]; names: string[]; rows: RowInfo[]; cpus: { cpu: number; runs: number }[];
  counts: Record<string, number>; max_px: number;
}
// [begin, end, dominant state, ns per state]
export type StateRun = [number, number, number, number[]];
// [begin, end, depth, kind, name]
export type SliceTuple = [number, number, number, number, number];
export interface TimelineRow {
  id: number; states: StateRun[]; slices: SliceTuple[]; hidden: number; truncated: boolean;
}
export interface Timeline { t0: number; t1: number; px: number; bucket_ns: number; rows: TimelineRow[] }
// [begin, end, thread location id, preempted]
export type CpuRun = [number, number, number, number];
export interface CpuRowData { cpu: number; busy: StateRun[]; runs: CpuRun[]; hidden: number }
export interface Cpus { t0: number; t1: number; px: number; cpus: CpuRowData[] }
// [from, to, send, recv, bytes, tag]
export type MessageTuple = [number, number, number, number, number, number];
export interface Messages { messages: MessageTuple[]; more: boolean }
export interface Finding {
  id: string; text: string; evidence: string; percent_of_run: number; time_at_stake_ns: number;
  subjects: string[]; rows: number[]; t0: number; t1: number;
}

export async function get<T>(path: string): Promise<T> {
  const r = await fetch(path);
  const body = await r.json();
  if (!r.ok) throw new Error(`${path}: ${body.error ?? r.status}`);
  return body as T;
}

export function fmtNs(ns: number): string {
  const a = Math.abs(ns);
  if (a >= 1e9) return `${(ns / 1e9).toFixed(a >= 1e10 ? 1 : 3)} s`;
  if (a >= 1e6) return `${(ns / 1e6).toFixed(a >= 1e7 ? 1 : 3)} ms`;
  if (a >= 1e3) return `${(ns / 1e3).toFixed(a >= 1e4 ? 1 : 3)} µs`;
  return `${Math.round(ns)} ns`;
}

export const STATE_COLORS: Record<string, string> = {
  running: '#2e9d3e', queued: '#f0a020', comm_wait: '#d63c3c', lock_wait: '#8e5cc4',
  timer_wait: '#3a7dc8', io_wait: '#8c564b', other: '#b8b8b8',
};
export const SLICE_COLORS = ['#4db6ac', '#ef8a62', '#b39ddb', '#90a4ae'];

// A stable colour per thread (CPU barscope).
export function threadColor(id: number): string {
  const h = (id * 137.508) % 360;
  return `hsl(${h.toFixed(0)}, 55%, 55%)`;
}
