// The process graph: the parties on a circle in rank order (so a ring reads as a ring), each link
// direction drawn as its own curved arrow bowed to its right (A -> B and B -> A never overlap),
// and the utilisation of both: a node is a pie of its threads' states, larger the more it ran; an
// edge is wider the more bytes/s it carried, bluer when moving data, redder when its ends waited
// for each other. Stepped interval by interval (/api/graph), or the mean over the window; the
// mean and standard deviation of every figure over the window's steps beside it.
import {
  fmtBytes, fmtNs, Graph, lerpColor, Session, sizeCanvas, STATE_COLORS, WAIT_SCALE,
} from './api';
import { Parties } from './comm';
import { circle } from './shared';

export interface EdgeStep {
  from: number; to: number;  // party indexes
  messages: number; bytes: number; wait: number;
  bytesPerS: number; waitShare: number;  // wait / the step's duration
}
export interface Stat { mean: number; sd: number }
export interface GraphModel {
  steps: number;
  stepNs: number[];
  nodeStates: number[][][];          // [step][party][state] ns
  edges: Map<string, EdgeStep[]>;    // "from>to" -> per step
  maxBytesPerS: number;
}

export function graphModel(g: Graph, ps: Parties, nStates: number): GraphModel {
  const steps = g.steps, n = ps.list.length;
  const stepNs = Array.from({ length: steps }, (_, i) => Math.max(1, g.bounds[i + 1] - g.bounds[i]));
  const nodeStates = Array.from({ length: steps }, () =>
    Array.from({ length: n }, () => new Array<number>(nStates).fill(0)));
  for (const node of g.nodes) {
    const p = ps.of.get(node.id);
    if (p === undefined) continue;
    node.states.forEach((st, i) => st.forEach((v, s) => { nodeStates[i][p][s] += v; }));
  }
  const edges = new Map<string, EdgeStep[]>();
  let maxBytesPerS = 0;
  for (const k of g.links) {
    const from = ps.of.get(k.from), to = ps.of.get(k.to);
    if (from === undefined || to === undefined) continue;
    const key = `${from}>${to}`;
    let e = edges.get(key);
    if (!e) {
      e = stepNs.map(() => ({ from, to, messages: 0, bytes: 0, wait: 0, bytesPerS: 0, waitShare: 0 }));
      edges.set(key, e);
    }
    for (let i = 0; i < steps; ++i) {
      const s = e[i];
      s.messages += k.messages[i];
      s.bytes += k.bytes[i];
      s.wait += k.wait_ns[i];
      s.bytesPerS = s.bytes / (stepNs[i] / 1e9);
      s.waitShare = s.wait / stepNs[i];
      maxBytesPerS = Math.max(maxBytesPerS, s.bytesPerS);
    }
  }
  return { steps, stepNs, nodeStates, edges, maxBytesPerS };
}

export function stat(xs: number[]): Stat {
  if (!xs.length) return { mean: 0, sd: 0 };
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
  return { mean, sd };
}

// A party's state ns at a step, or summed over the window (step < 0).
export function nodeAt(m: GraphModel, party: number, step: number): number[] {
  if (step >= 0) return m.nodeStates[step][party];
  const sum = new Array<number>(m.nodeStates[0]?.[party]?.length ?? 0).fill(0);
  m.nodeStates.forEach((st) => st[party].forEach((v, s) => { sum[s] += v; }));
  return sum;
}
export function edgeAt(m: GraphModel, e: EdgeStep[], step: number): EdgeStep {
  if (step >= 0) return e[step];
  const total = m.stepNs.reduce((a, b) => a + b, 0);
  const r = { ...e[0], messages: 0, bytes: 0, wait: 0 };
  e.forEach((s) => { r.messages += s.messages; r.bytes += s.bytes; r.wait += s.wait; });
  return { ...r, bytesPerS: r.bytes / (total / 1e9), waitShare: r.wait / total };
}
const share = (st: number[], s: number) => st[s] / Math.max(1, st.reduce((a, b) => a + b, 0));
export function runningStat(m: GraphModel, party: number): Stat {
  return stat(m.nodeStates.filter((st) => st[party].some((v) => v > 0)).map((st) => share(st[party], 0)));
}
export function edgeStats(e: EdgeStep[]): { bytesPerS: Stat; waitShare: Stat } {
  return { bytesPerS: stat(e.map((s) => s.bytesPerS)), waitShare: stat(e.map((s) => s.waitShare)) };
}

interface Geometry { cx: number; cy: number; R: number; pos: [number, number][]; radius: number[] }
export interface DrawnGraph {
  geo: Geometry;
  curves: { key: string; pts: [number, number][] }[];
}

const pct = (x: number) => `${(100 * x).toFixed(x > 0 && x < 0.1 ? 1 : 0)}%`;

function curve(a: [number, number], b: [number, number], ra: number, rb: number): [number, number][] {
  const dx = b[0] - a[0], dy = b[1] - a[1], len = Math.hypot(dx, dy) || 1;
  // The control point off the chord to the right of the direction of travel: the reverse
  // direction bows to the other side.
  const bow = Math.min(60, 0.22 * len);
  const cp: [number, number] = [(a[0] + b[0]) / 2 - (dy / len) * bow, (a[1] + b[1]) / 2 + (dx / len) * bow];
  const pts: [number, number][] = [];
  for (let i = 0; i <= 24; ++i) {
    const t = i / 24, u = 1 - t;
    pts.push([u * u * a[0] + 2 * u * t * cp[0] + t * t * b[0], u * u * a[1] + 2 * u * t * cp[1] + t * t * b[1]]);
  }
  // Trim the ends to the nodes' rims.
  const outside = (p: [number, number], c: [number, number], r: number) => Math.hypot(p[0] - c[0], p[1] - c[1]) > r + 2;
  return pts.filter((p) => outside(p, a, ra) && outside(p, b, rb));
}

export function drawGraph(canvas: HTMLCanvasElement, session: Session, ps: Parties, m: GraphModel,
                          step: number, selectedParties: Set<number>,
                          selectedLink: [number, number] | null): DrawnGraph {
  const width = canvas.clientWidth || 500, h = 440, c = sizeCanvas(canvas, h);
  const n = ps.list.length, cx = width / 2, cy = h / 2, R = Math.max(40, Math.min(width, h) / 2 - 70);
  const pos = circle(n, cx, cy, R);
  const states = ps.list.map((_, i) => nodeAt(m, i, step));
  const radius = states.map((st) => 12 + 14 * share(st, 0) * (n > 24 ? 0.4 : 1));
  const curves: DrawnGraph['curves'] = [];
  for (const [key, e] of m.edges) {
    const s = edgeAt(m, e, step);
    const pts = curve(pos[s.from], pos[s.to], radius[s.from], radius[s.to]);
    if (pts.length < 2 || (!s.messages && step >= 0)) continue;  // silent in this step
    curves.push({ key, pts });
    const sel = selectedLink && selectedLink[0] === s.from && selectedLink[1] === s.to;
    const lw = 1.5 + 9 * (m.maxBytesPerS ? s.bytesPerS / m.maxBytesPerS : 0), head = 9 + 1.2 * lw;
    const path = () => {
      c.beginPath();
      pts.forEach((p, i) => (i ? c.lineTo(p[0], p[1]) : c.moveTo(p[0], p[1])));
    };
    if (sel) {  // a dark halo under the selected link
      c.strokeStyle = '#000';
      c.lineWidth = lw + 4;
      path();
      c.stroke();
    }
    c.strokeStyle = lerpColor(WAIT_SCALE, Math.min(1, s.waitShare));
    c.lineWidth = lw;
    c.globalAlpha = sel ? 1 : 0.85;
    path();
    c.stroke();
    const [p, q] = [pts[pts.length - 2], pts[pts.length - 1]], ang = Math.atan2(q[1] - p[1], q[0] - p[0]);
    c.fillStyle = c.strokeStyle;
    c.beginPath();
    c.moveTo(q[0] + 2 * Math.cos(ang), q[1] + 2 * Math.sin(ang));
    c.lineTo(q[0] - head * Math.cos(ang - 0.45), q[1] - head * Math.sin(ang - 0.45));
    c.lineTo(q[0] - head * Math.cos(ang + 0.45), q[1] - head * Math.sin(ang + 0.45));
    c.fill();
    if (sel) {
      c.strokeStyle = '#000';
      c.lineWidth = 1.5;
      c.stroke();
    }
    c.globalAlpha = 1;
    if (n <= 16) {
      const mid = pts[Math.floor(pts.length / 2)];
      c.fillStyle = '#222';
      c.font = '10px system-ui, sans-serif';
      c.fillText(`${fmtBytes(s.bytesPerS)}/s, ${pct(s.waitShare)} wait`, mid[0] + 4, mid[1] - 3);
    }
  }
  ps.list.forEach((p, i) => {
    const st = states[i], total = st.reduce((a, b) => a + b, 0), r = radius[i];
    let a0 = -Math.PI / 2;
    if (total > 0) {
      st.forEach((v, s) => {
        if (!v) return;
        const a1 = a0 + (2 * Math.PI * v) / total;
        c.fillStyle = STATE_COLORS[session.states[s]] ?? '#999';
        c.beginPath(); c.moveTo(pos[i][0], pos[i][1]); c.arc(pos[i][0], pos[i][1], r, a0, a1); c.fill();
        a0 = a1;
      });
    } else {
      c.fillStyle = '#ddd';
      c.beginPath(); c.arc(pos[i][0], pos[i][1], r, 0, 2 * Math.PI); c.fill();
    }
    c.strokeStyle = selectedParties.has(i) ? '#000' : '#fff';
    c.lineWidth = selectedParties.has(i) ? 3 : 1.5;
    c.beginPath(); c.arc(pos[i][0], pos[i][1], r, 0, 2 * Math.PI); c.stroke();
    c.lineWidth = 1;
    if (n <= 32) {
      const out = [(pos[i][0] - cx) / R, (pos[i][1] - cy) / R];
      c.fillStyle = '#111';
      c.font = '11px system-ui, sans-serif';
      const text = `${p.label} ${pct(share(st, 0))} run`;
      const tw = c.measureText(text).width;
      c.fillText(text, pos[i][0] + out[0] * (r + 8) - tw / 2 + out[0] * tw / 2, pos[i][1] + out[1] * (r + 14) + 4);
    }
  });
  return { geo: { cx, cy, R, pos, radius }, curves };
}

export type GraphHit = { node: number } | { edge: string } | null;

export function hitGraph(d: DrawnGraph, x: number, y: number): GraphHit {
  const node = d.geo.pos.findIndex((p, i) => Math.hypot(p[0] - x, p[1] - y) <= d.geo.radius[i] + 2);
  if (node >= 0) return { node };
  let best: string | null = null, bestD = 7;
  for (const cv of d.curves)
    for (const p of cv.pts) {
      const dist = Math.hypot(p[0] - x, p[1] - y);
      if (dist < bestD) { bestD = dist; best = cv.key; }
    }
  return best ? { edge: best } : null;
}

export function nodeText(session: Session, ps: Parties, m: GraphModel, party: number, step: number): string {
  const st = nodeAt(m, party, step), total = st.reduce((a, b) => a + b, 0), r = runningStat(m, party);
  const p = ps.list[party];
  return [`${p.label} (${p.rows.length} thread${p.rows.length > 1 ? 's' : ''}${p.host ? `, ${p.host}` : ''})`,
    ...st.map((v, s) => (v ? `  ${session.states[s]}: ${fmtNs(v)} (${pct(v / Math.max(1, total))})` : ''))
      .filter((l) => l),
    `running over the window's ${m.steps} steps: mean ${pct(r.mean)}, sd ${pct(r.sd)}`].join('\n');
}

export function edgeText(ps: Parties, m: GraphModel, key: string, step: number): string {
  const e = m.edges.get(key)!, s = edgeAt(m, e, step), st = edgeStats(e);
  return [`${ps.list[s.from].label} → ${ps.list[s.to].label}${step >= 0 ? ` in step ${step + 1}` : ' over the window'}`,
    `${s.messages} messages, ${s.bytes} bytes: ${fmtBytes(s.bytesPerS)}/s`,
    `waiting ${fmtNs(s.wait)} (${pct(s.waitShare)} of the ${step >= 0 ? 'step' : 'window'})`,
    `over the window's ${m.steps} steps: ${fmtBytes(st.bytesPerS.mean)}/s ± ${fmtBytes(st.bytesPerS.sd)}/s, ` +
    `wait ${pct(st.waitShare.mean)} ± ${pct(st.waitShare.sd)}`].join('\n');
}
