// Per node: for each host, the state split of each of its ranks (all the rank's threads, helper
// threads included, summed) and of the host as a whole, as 100% bars; and a pie per rank over all
// its threads. They show the process graph's step, or the whole window, as the graph does.
import { fmtNs, Session, sizeCanvas, STATE_COLORS } from './api';
import { Parties } from './comm';
import { GraphModel, nodeAt } from './graph';

export interface NodeBar { host: string; label: string; states: number[] }

export function nodeBars(ps: Parties, m: GraphModel, step: number): NodeBar[] {
  const hosts = [...new Set(ps.list.map((p) => p.host))];
  const bars: NodeBar[] = [];
  for (const host of hosts) {
    const members = ps.list.map((p, i) => ({ p, i })).filter((x) => x.p.host === host);
    const total = new Array<number>(m.nodeStates[0]?.[0]?.length ?? 0).fill(0);
    const rows = members.map(({ p, i }) => {
      const st = nodeAt(m, i, step);
      st.forEach((v, s) => { total[s] += v; });
      return { host, label: `${p.label} (${p.rows.length} thr.)`, states: st };
    });
    bars.push({ host, label: `${host || 'host'}: all`, states: total }, ...rows);
  }
  return bars;
}

export const BAR_H = 18;
export function drawBars(canvas: HTMLCanvasElement, session: Session, bars: NodeBar[]): void {
  const c = sizeCanvas(canvas, bars.length * BAR_H + 4), left = 150, w = (canvas.clientWidth || 500) - left - 8;
  bars.forEach((b, i) => {
    const y = i * BAR_H + 2, total = b.states.reduce((a, v) => a + v, 0);
    c.fillStyle = b.label.endsWith(': all') ? '#000' : '#333';
    c.font = b.label.endsWith(': all') ? 'bold 11px system-ui, sans-serif' : '11px system-ui, sans-serif';
    c.fillText(b.label, 4, y + 12, left - 8);
    let x = left;
    b.states.forEach((v, s) => {
      if (!v || !total) return;
      const dw = (w * v) / total;
      c.fillStyle = STATE_COLORS[session.states[s]] ?? '#999';
      c.fillRect(x, y + 2, dw, BAR_H - 5);
      x += dw;
    });
  });
}

export const PIE = 150;
export function drawPies(canvas: HTMLCanvasElement, session: Session, ps: Parties, m: GraphModel,
                         step: number): number[][] {
  const width = canvas.clientWidth || 500, per = Math.max(1, Math.floor(width / PIE));
  const shown = ps.list.slice(0, 64);
  const c = sizeCanvas(canvas, Math.ceil(shown.length / per) * PIE + 4);
  const drawn: number[][] = [];
  shown.forEach((p, i) => {
    const st = nodeAt(m, i, step), total = st.reduce((a, v) => a + v, 0);
    const cx = (i % per) * PIE + PIE / 2, cy = Math.floor(i / per) * PIE + 62, r = 38;
    let a0 = -Math.PI / 2;
    st.forEach((v, s) => {
      if (!v || !total) return;
      const a1 = a0 + (2 * Math.PI * v) / total;
      c.fillStyle = STATE_COLORS[session.states[s]] ?? '#999';
      c.beginPath(); c.moveTo(cx, cy); c.arc(cx, cy, r, a0, a1); c.fill();
      a0 = a1;
    });
    c.fillStyle = '#222';
    const title = `${p.label}, ${p.rows.length} thread${p.rows.length > 1 ? 's' : ''}`;
    c.fillText(title, cx - c.measureText(title).width / 2, cy - r - 8);
    const run = `${((100 * st[0]) / Math.max(1, total)).toFixed(0)}% run of ${fmtNs(total)}`;
    c.fillText(run, cx - c.measureText(run).width / 2, cy + r + 14);
    drawn.push(st);
  });
  return drawn;
}
