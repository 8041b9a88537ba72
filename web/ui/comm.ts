// The parties of the communication views (a rank: all its threads; a process outside MPI; or, on
// demand, each thread) and the communication matrix: senders as rows, receivers as columns, one
// cell per communicating pair over the visible range, coloured by the chosen figure (messages,
// bytes or wait time); what is under the pointer, with its exact figures.
import {
  fmtBytes, fmtNs, HEAT_SCALE, lerpColor, Matrix, Session, sizeCanvas,
} from './api';
import { byRank } from './shared';

export interface Party { label: string; rows: number[]; rank: number; host: string }
export interface Parties { list: Party[]; of: Map<number, number> }  // row id -> party index

// Ranks (in rank order; in an MPI job the launcher's processes are left out: they send no MPI
// message), or processes when there are no ranks, or every thread in the barscope's order.
export function parties(session: Session, threads: boolean): Parties {
  const list: Party[] = [], of = new Map<number, number>();
  if (threads) {
    session.rows.forEach((r) => {
      of.set(r.id, list.length);
      list.push({ label: r.label, rows: [r.id], rank: r.rank, host: r.host });
    });
    return { list, of };
  }
  const ranks = byRank(session.rows);
  for (const [rank, rows] of ranks) {
    rows.forEach((r) => of.set(r.id, list.length));
    list.push({ label: `rank ${rank}`, rows: rows.map((r) => r.id), rank, host: rows[0].host });
  }
  const byPid = new Map<string, Party>();  // processes outside MPI, in the barscope's order
  for (const r of ranks.length ? [] : session.rows) {
    const key = `${r.host}/${r.pid}`;
    let p = byPid.get(key);
    if (!p) {
      p = { label: r.label, rows: [], rank: -1, host: r.host };
      byPid.set(key, p);
      list.push(p);
    }
    p.rows.push(r.id);
    of.set(r.id, list.indexOf(p));
  }
  return { list, of };
}

export type Metric = 'messages' | 'bytes' | 'wait';
export interface LinkFigures {
  from: number; to: number;  // party indexes
  messages: number; bytes: number; wait: number; senderWait: number; receiverWait: number;
}

// The matrix's cells summed per pair of parties.
export function matrixLinks(m: Matrix, ps: Parties): LinkFigures[] {
  const cells = new Map<string, LinkFigures>();
  for (const [f, t, messages, bytes, wait, sw, rw] of m.cells) {
    const from = ps.of.get(f), to = ps.of.get(t);
    if (from === undefined || to === undefined) continue;
    const key = `${from}>${to}`;
    let c = cells.get(key);
    if (!c) {
      c = { from, to, messages: 0, bytes: 0, wait: 0, senderWait: 0, receiverWait: 0 };
      cells.set(key, c);
    }
    c.messages += messages;
    c.bytes += bytes;
    c.wait += wait;
    c.senderWait += sw;
    c.receiverWait += rw;
  }
  return [...cells.values()];
}

export function figure(c: LinkFigures, metric: Metric): number {
  return metric === 'messages' ? c.messages : metric === 'bytes' ? c.bytes : c.wait;
}
function shortFigure(v: number, metric: Metric): string {
  return metric === 'messages' ? String(v) : metric === 'bytes' ? fmtBytes(v) : fmtNs(v);
}

export function linkText(ps: Parties, c: LinkFigures): string {
  return `${ps.list[c.from].label} → ${ps.list[c.to].label}\n` +
    `${c.messages} messages, ${c.bytes} bytes (${fmtBytes(c.bytes)})\n` +
    `wait ${fmtNs(c.wait)}: sender ${fmtNs(c.senderWait)}, receiver ${fmtNs(c.receiverWait)}`;
}

// Cell geometry of the matrix canvas: labels on the left and on top.
export interface MatrixLayout { left: number; top: number; cell: number; n: number }

export function drawMatrix(canvas: HTMLCanvasElement, ps: Parties, links: LinkFigures[],
                           metric: Metric, selected: [number, number] | null): MatrixLayout {
  const n = ps.list.length, width = canvas.clientWidth || 400, left = 80, top = 34;
  const cell = Math.max(6, Math.min(64, Math.floor((width - left - 8) / Math.max(1, n))));
  const c = sizeCanvas(canvas, top + n * cell + 24, 400);
  c.fillStyle = '#555';
  c.fillText('from ↓  to →', 2, 12);
  ps.list.forEach((p, i) => {
    c.fillStyle = '#222';
    c.fillText(p.label.slice(0, 12), 2, top + i * cell + cell / 2 + 4, left - 4);
    c.save();
    c.translate(left + i * cell + cell / 2 - 4, top - 4);
    c.rotate(-Math.PI / 6);
    c.fillText(p.label.slice(0, 10), 0, 0);
    c.restore();
  });
  c.strokeStyle = '#eee';
  for (let i = 0; i <= n; ++i) {
    c.beginPath(); c.moveTo(left, top + i * cell); c.lineTo(left + n * cell, top + i * cell); c.stroke();
    c.beginPath(); c.moveTo(left + i * cell, top); c.lineTo(left + i * cell, top + n * cell); c.stroke();
  }
  const max = Math.max(1, ...links.map((l) => figure(l, metric)));
  for (const l of links) {
    const v = figure(l, metric), x = left + l.to * cell, y = top + l.from * cell;
    c.fillStyle = lerpColor(HEAT_SCALE, 0.12 + 0.88 * Math.sqrt(v / max));
    c.fillRect(x + 1, y + 1, cell - 2, cell - 2);
    if (selected && selected[0] === l.from && selected[1] === l.to) {
      c.strokeStyle = '#000';
      c.lineWidth = 2;
      c.strokeRect(x + 1, y + 1, cell - 2, cell - 2);
      c.lineWidth = 1;
    }
    if (cell >= 36) {
      c.fillStyle = v / max > 0.45 ? '#fff' : '#222';
      c.fillText(shortFigure(v, metric), x + 3, y + cell / 2 + 4, cell - 6);
    }
  }
  c.fillStyle = '#555';
  c.fillText(`colour: ${metric === 'wait' ? 'wait time' : metric} (max ${shortFigure(max, metric)})`,
             left, top + n * cell + 16);
  return { left, top, cell, n };
}

export function hitMatrix(g: MatrixLayout, links: LinkFigures[], x: number,
                          y: number): LinkFigures | null {
  const col = Math.floor((x - g.left) / g.cell), row = Math.floor((y - g.top) / g.cell);
  if (x < g.left || y < g.top || col >= g.n || row >= g.n) return null;
  return links.find((l) => l.from === row && l.to === col) ?? null;
}
