// The JSON answers of parmon view's API (docs/http-api.md) as TypeScript types, and the fetches.
// Times are ns from the session start.

export interface RowInfo {
  id: number; label: string; name: string; pid: number; tid: number; rank: number;
  kind: string; main_thread: boolean; host: string; state_source: string; events: number;
  messages_sent: number; messages_received: number; slices: number; first: number; last: number;
}
export interface Session {
  file: string; command: string; start: number; end: number; states: string[];
  slice_kinds: string[]; names: string[]; rows: RowInfo[]; cpus: { cpu: number; runs: number }[];
  counts: Record<string, number>; max_px: number;
  problems?: string[];  // a damaged stored trace: what the reader found (served from what is intact)
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
// [from row, to row, messages, bytes, wait ns, sender wait ns, receiver wait ns]
export type MatrixCell = [number, number, number, number, number, number, number];
export interface Matrix {
  t0: number; t1: number; rows: number[]; cells: MatrixCell[];
  totals: { messages: number; bytes: number; wait_ns: number };
}
export interface GraphLink { from: number; to: number; messages: number[]; bytes: number[]; wait_ns: number[] }
export interface Graph {
  t0: number; t1: number; steps: number; bounds: number[];
  nodes: { id: number; states: number[][] }[]; links: GraphLink[];
}
export interface Finding {
  id: string; text: string; evidence: string; percent_of_run: number; time_at_stake_ns: number;
  subjects: string[]; rows: number[]; t0: number; t1: number;
}

// path: '/api/...'; asked relative to the page, so that the page works under a prefix
// (`parmon serve --http` serves each session at /s/<session>/).
export async function get<T>(path: string): Promise<T> {
  const r = await fetch(path.replace(/^\//, ''));
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

export function fmtBytes(b: number): string {
  if (b >= 1e9) return `${(b / 1e9).toFixed(2)} GB`;
  if (b >= 1e6) return `${(b / 1e6).toFixed(2)} MB`;
  if (b >= 1e3) return `${(b / 1e3).toFixed(1)} kB`;
  return `${Math.round(b)} B`;
}

// A colour between stops (0 <= x <= 1), for scales.
export function lerpColor(stops: [number, number, number][], x: number): string {
  const v = Math.max(0, Math.min(1, Number.isFinite(x) ? x : 0)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(v)), f = v - i;
  const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// Waiting share of a link: blue (moving data) to orange to red (waiting for the partner).
export const WAIT_SCALE: [number, number, number][] = [[52, 152, 219], [243, 156, 18], [192, 57, 43]];
export const HEAT_SCALE: [number, number, number][] = [[255, 245, 235], [253, 141, 60], [127, 39, 4]];

// A stable colour per thread (CPU barscope).
export function threadColor(id: number): string {
  const h = (id * 137.508) % 360;
  return `hsl(${h.toFixed(0)}, 55%, 55%)`;
}

// Sizes a canvas to its CSS width and `h` CSS px high for the device's pixel ratio, clears it and
// returns its context, in CSS px.
export function sizeCanvas(canvas: HTMLCanvasElement, h: number, fallbackW = 500): CanvasRenderingContext2D {
  const dpr = window.devicePixelRatio || 1, width = canvas.clientWidth || fallbackW;
  canvas.style.height = `${h}px`;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(h * dpr);
  const c = canvas.getContext('2d')!;
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, width, h);
  c.font = '11px system-ui, sans-serif';
  return c;
}

// /api/data and /api/data/step (the data views).
export interface DataMatrix {
  index: number; name: string; type: string; layout: string; rows: number; cols: number;
  location: number; label: string; steps: number; times: number[]; calls: number[];
  locations: number[]; incomplete_steps: number; steps_not_kept: number;
}
export interface DataList { matrices: DataMatrix[]; unreadable_parts: number; first_problem?: string }
export interface DataStep {
  matrix: number; name: string; step: number; call: number; time: number; location: number;
  rows: number; cols: number; block_rows: number; block_cols: number; out_rows: number;
  out_cols: number; range: { min: number; max: number; min_abs_nonzero: number };
  missing: number; non_finite: number; complete: boolean;
  mean: (number | null)[];
  min?: (number | null)[]; max?: (number | null)[];  // only when a block holds several elements
}
