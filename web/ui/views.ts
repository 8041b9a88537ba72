// What the two barscopes draw and what is under the pointer: the execution barscope (a row per
// thread: its states at the bottom of the row, its slices nested above, message lines across
// rows) and the CPU barscope (a row per CPU: how busy it was, and which thread ran there).
import {
  Cpus, fmtNs, MessageTuple, SLICE_COLORS, Session, SliceTuple, STATE_COLORS, StateRun,
  threadColor, Timeline,
} from './api';
import { AXIS_H, Scope } from './scope';

const STATE_H = 8;
const SLICE_H = 7;
export const EXEC_ROW_H = 8 + STATE_H + 3 * SLICE_H;
export const CPU_ROW_H = 22;

export interface Hit { text: string; details: string; row: number; raw?: unknown }

export function drawExec(s: Scope, session: Session, tl: Timeline | null, msgs: MessageTuple[],
                         selected: Set<number>, onLink: ((from: number, to: number) => boolean) | null,
): { slices: number; runs: number } {
  s.begin(session.rows.length);
  session.rows.forEach((r, i) => s.label(i, r.label, selected.has(r.id)));
  let slices = 0, runs = 0;
  if (!tl) return { slices, runs };
  const c = s.ctx, unclip = s.clipPlot();
  const rowIndex = new Map(session.rows.map((r, i) => [r.id, i]));
  for (const row of tl.rows) {
    const i = rowIndex.get(row.id);
    if (i === undefined) continue;
    const top = AXIS_H + i * s.rowH;
    for (const [b, e, st] of row.states) {
      c.fillStyle = STATE_COLORS[session.states[st]] ?? '#000';
      const x0 = s.x(b), x1 = s.x(e);
      c.fillRect(x0, top + s.rowH - STATE_H - 2, Math.max(1, x1 - x0), STATE_H);
      ++runs;
    }
    for (const [b, e, depth, kind, name] of row.slices) {
      if (depth > 2) continue;
      const x0 = s.x(b), x1 = s.x(e), y = top + 3 + depth * SLICE_H;
      c.fillStyle = SLICE_COLORS[kind] ?? '#999';
      c.fillRect(x0, y, Math.max(1, x1 - x0), SLICE_H - 1);
      if (x1 - x0 > 40) {
        c.fillStyle = '#111';
        c.font = '9px system-ui, sans-serif';
        c.fillText(session.names[name] ?? '', Math.max(x0, s.x(tl.t0)) + 2, y + SLICE_H - 1, x1 - x0 - 4);
      }
      ++slices;
    }
  }
  for (const [from, to, send, recv] of msgs) {
    const a = rowIndex.get(from), b = rowIndex.get(to);
    if (a === undefined || b === undefined) continue;
    const hl = onLink !== null && onLink(from, to);  // the selected link's messages stand out
    c.strokeStyle = hl ? '#c00' : onLink ? 'rgba(20,20,20,0.25)' : 'rgba(20,20,20,0.55)';
    c.lineWidth = hl ? 2 : 1;
    c.beginPath();
    c.moveTo(s.x(send), AXIS_H + a * s.rowH + s.rowH / 2);
    c.lineTo(s.x(recv), AXIS_H + b * s.rowH + s.rowH / 2);
    c.stroke();
  }
  unclip();
  return { slices, runs };
}

function stateLines(session: Session, ns: number[]): string {
  return ns.map((v, k) => (v > 0 ? `  ${session.states[k]}: ${fmtNs(v)}` : ''))
    .filter((l) => l).join('\n');
}

export function hitExec(s: Scope, session: Session, tl: Timeline | null, x: number,
                        y: number): Hit | null {
  const i = s.rowAt(y);
  if (i < 0 || !tl) return null;
  const info = session.rows[i];
  const row = tl.rows.find((r) => r.id === info.id);
  if (!row) return null;
  const t = s.t(x), top = AXIS_H + i * s.rowH;
  const lines = [`${info.label} (pid ${info.pid}, tid ${info.tid})`, `at ${fmtNs(t)}`];
  const depth = Math.floor((y - top - 3) / SLICE_H);
  const tol = (tl.t1 - tl.t0) / tl.px;
  const slice = row.slices.find(([b, e, d]) => d === depth && b - tol / 2 <= t && t <= e + tol / 2);
  if (slice) {
    const [b, e, , kind, name] = slice as SliceTuple;
    lines.push(`${session.slice_kinds[kind]} ${session.names[name]}: ${fmtNs(e - b)}`,
               `  from ${fmtNs(b)} to ${fmtNs(e)}`);
  }
  const run = row.states.find(([b, e]) => b <= t && t < e) as StateRun | undefined;
  if (run) {
    lines.push(`${session.states[run[2]]} mostly, ${fmtNs(run[1] - run[0])} (${fmtNs(run[0])} to ${fmtNs(run[1])}):`,
               stateLines(session, run[3]));
  }
  if (row.hidden) lines.push(`${row.hidden} slices too short to draw in view`);
  const text = lines.join('\n');
  const details = `${text}\n\nevents: ${info.events}\nslices: ${info.slices}\n` +
    `messages sent: ${info.messages_sent}, received: ${info.messages_received}\n` +
    `states from: ${info.state_source}`;
  return { text, details, row: info.id, raw: { row: info.id, run: run ?? null, slice: slice ?? null } };
}

export function drawCpus(s: Scope, cpus: Cpus | null, nCpus: number, labels: Map<number, string>,
                         selected: Set<number>): number {
  s.begin(nCpus);
  if (!cpus) return 0;
  const c = s.ctx;
  cpus.cpus.forEach((cpu, i) => s.label(i, `cpu ${cpu.cpu}`, false));
  const unclip = s.clipPlot();
  let drawn = 0;
  cpus.cpus.forEach((cpu, i) => {
    const top = AXIS_H + i * s.rowH;
    for (const [b, e, , ns] of cpu.busy) {
      const share = Math.min(1, ns[0] / Math.max(1, e - b));
      c.fillStyle = `rgba(60,60,60,${(0.15 + 0.5 * share).toFixed(2)})`;
      c.fillRect(s.x(b), top + s.rowH - 6, Math.max(1, s.x(e) - s.x(b)), 4);
    }
    for (const [b, e, thread, preempted] of cpu.runs) {
      const x0 = s.x(b), w = Math.max(1, s.x(e) - x0);
      c.fillStyle = threadColor(thread);
      c.fillRect(x0, top + 3, w, s.rowH - 11);
      if (selected.has(thread)) {
        c.strokeStyle = '#000';
        c.strokeRect(x0, top + 3, w, s.rowH - 11);
      }
      if (preempted) {  // a red tick where the thread was preempted
        c.fillStyle = '#d00';
        c.fillRect(x0 + w - 1, top + 1, 2, s.rowH - 7);
      }
      if (w > 50) {
        c.fillStyle = '#111';
        c.font = '10px system-ui, sans-serif';
        c.fillText(labels.get(thread) ?? `#${thread}`, x0 + 2, top + 13, w - 4);
      }
      ++drawn;
    }
  });
  unclip();
  return drawn;
}

export function hitCpu(s: Scope, cpus: Cpus | null, labels: Map<number, string>, x: number,
                       y: number): Hit | null {
  const i = s.rowAt(y);
  if (i < 0 || !cpus || i >= cpus.cpus.length) return null;
  const cpu = cpus.cpus[i], t = s.t(x);
  const lines = [`cpu ${cpu.cpu} at ${fmtNs(t)}`];
  const run = cpu.runs.find(([b, e]) => b <= t && t <= e);
  if (run) {
    lines.push(`${labels.get(run[2]) ?? `#${run[2]}`} ran ${fmtNs(run[1] - run[0])}` +
               `${run[3] ? ', then was preempted' : ''}`);
  }
  const busy = cpu.busy.find(([b, e]) => b <= t && t < e);
  if (busy) lines.push(`busy ${fmtNs(busy[3][0])} of ${fmtNs(busy[1] - busy[0])}`);
  if (cpu.hidden) lines.push(`${cpu.hidden} shorter stays not drawn`);
  const text = lines.join('\n');
  return { text, details: text, row: run ? run[2] : -1 };
}
