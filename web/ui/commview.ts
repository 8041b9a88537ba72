// The communication panel (matrix and process graph) and the per-node bars and pies, over the
// visible range: their answers, the graph's step (slider, play, or -1 for the whole window), the
// parties (ranks, or threads on demand), and the linked selection of a link or a party.
import { fmtNs, Graph, Matrix, Session } from './api';
import {
  drawMatrix, hitMatrix, LinkFigures, linkText, matrixLinks, MatrixLayout, Metric, Parties, parties,
} from './comm';
import {
  drawGraph, DrawnGraph, edgeAt, edgeStats, edgeText, GraphModel, graphModel, hitGraph, nodeAt,
  nodeText, runningStat,
} from './graph';
import { drawBars, drawPies, nodeBars } from './nodes';

// What the panel drew, for tests (window.parmonView.comm).
export interface CommState {
  labels: string[];
  matrix: { from: string; to: string; messages: number; bytes: number; wait: number }[];
  metric: Metric;
  step: number;
  steps: number;
  stepRange: [number, number];
  edges: { from: string; to: string; messages: number; bytes: number; wait: number; bytesPerS: number;
           waitShare: number }[];
  nodes: { label: string; running: number; mean: number; sd: number }[];
  link: [string, string] | null;
  bars: string[];
  pies: number[][];
  cell: { left: number; top: number; size: number };  // the matrix's geometry, CSS px
  positions: [number, number][];                      // the graph's nodes, CSS px
}

export interface Selection {
  rows: Set<number>;
  link: { from: number[]; to: number[] } | null;  // row ids at either end
  changed(details: string): void;                  // redraw every view
}

const $ = (id: string) => document.getElementById(id)!;
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export class CommPanel {
  matrix: Matrix | null = null;
  graph: Graph | null = null;
  step = -1;
  readonly state: CommState = {
    labels: [], matrix: [], metric: 'bytes', step: -1, steps: 0, stepRange: [0, 0], edges: [],
    nodes: [], link: null, bars: [], pies: [], cell: { left: 0, top: 0, size: 0 }, positions: [],
  };
  private ps: Parties = { list: [], of: new Map() };
  private links: LinkFigures[] = [];
  private model: GraphModel | null = null;
  private layout: MatrixLayout | null = null;
  private drawn: DrawnGraph | null = null;
  private link: [number, number] | null = null;  // party indexes
  private timer = 0;

  constructor(private session: Session, private sel: Selection,
              private tip: (text: string, raw: unknown, e: MouseEvent | null) => void) {
    const slider = $('graph-step') as HTMLInputElement;
    slider.addEventListener('input', () => this.setStep(Number(slider.value)));
    $('graph-window').addEventListener('click', () => { this.stop(); this.setStep(-1); });
    $('graph-play').addEventListener('click', () => (this.timer ? this.stop() : this.play()));
    $('matrix-metric').addEventListener('change', () => this.draw());
    $('comm-threads').addEventListener('change', () => { this.link = null; this.draw(); });
    const matrix = $('matrix') as HTMLCanvasElement, graph = $('graph') as HTMLCanvasElement;
    const at = (c: HTMLCanvasElement, e: MouseEvent) => {
      const b = c.getBoundingClientRect();
      return [e.clientX - b.left, e.clientY - b.top] as const;
    };
    matrix.addEventListener('mousemove', (e) => this.hoverMatrix(...at(matrix, e), e));
    matrix.addEventListener('mouseleave', () => this.tip('', null, null));
    matrix.addEventListener('click', (e) => this.clickMatrix(...at(matrix, e)));
    graph.addEventListener('mousemove', (e) => this.hoverGraph(...at(graph, e), e));
    graph.addEventListener('mouseleave', () => this.tip('', null, null));
    graph.addEventListener('click', (e) => this.clickGraph(...at(graph, e)));
  }

  set(matrix: Matrix, graph: Graph): void {
    this.matrix = matrix;
    this.graph = graph;
    const slider = $('graph-step') as HTMLInputElement;
    slider.max = String(Math.max(0, graph.steps - 1));
    if (this.step >= graph.steps) this.step = -1;
  }

  setStep(step: number): void {
    this.step = step;
    if (step >= 0) ($('graph-step') as HTMLInputElement).value = String(step);
    this.draw();
  }
  private play(): void {
    $('graph-play').textContent = 'pause';
    this.timer = window.setInterval(() => {
      if (this.graph) this.setStep((this.step + 1) % this.graph.steps);
    }, 700);
  }
  private stop(): void {
    window.clearInterval(this.timer);
    this.timer = 0;
    $('graph-play').textContent = 'play';
  }

  draw(): void {
    if (!this.matrix || !this.graph) return;
    const metric = ($('matrix-metric') as HTMLSelectElement).value as Metric;
    this.ps = parties(this.session, ($('comm-threads') as HTMLInputElement).checked);
    this.links = matrixLinks(this.matrix, this.ps);
    this.model = graphModel(this.graph, this.ps, this.session.states.length);
    const selParties = new Set<number>();
    this.sel.rows.forEach((r) => { const p = this.ps.of.get(r); if (p !== undefined) selParties.add(p); });
    this.layout = drawMatrix($('matrix') as HTMLCanvasElement, this.ps, this.links, metric, this.link);
    this.drawn = drawGraph($('graph') as HTMLCanvasElement, this.session, this.ps, this.model, this.step,
                           selParties, this.link);
    const g = this.graph, s = this.step;
    const when: [number, number] = s >= 0 ? [g.bounds[s], g.bounds[s + 1]] : [g.t0, g.t1];
    $('graph-when').textContent = `${s >= 0 ? `step ${s + 1} of ${g.steps}` : `window (${g.steps} steps)`}: ` +
      `${fmtNs(when[0])} – ${fmtNs(when[1])}`;
    this.drawStats();
    // Per node, always by rank (the pies are per rank over all its threads).
    const ranks = parties(this.session, false), rm = graphModel(g, ranks, this.session.states.length);
    const bars = nodeBars(ranks, rm, s);
    drawBars($('node-bars') as HTMLCanvasElement, this.session, bars);
    const pies = drawPies($('node-pies') as HTMLCanvasElement, this.session, ranks, rm, s);
    const label = (i: number) => this.ps.list[i].label;
    Object.assign(this.state, {
      labels: this.ps.list.map((p) => p.label), metric, step: s, steps: g.steps, stepRange: when,
      matrix: this.links.map((l) => ({ from: label(l.from), to: label(l.to), messages: l.messages,
                                       bytes: l.bytes, wait: l.wait })),
      edges: [...this.model.edges.values()].map((e) => edgeAt(this.model!, e, s)).map((e) => ({
        from: label(e.from), to: label(e.to), messages: e.messages, bytes: e.bytes, wait: e.wait,
        bytesPerS: e.bytesPerS, waitShare: e.waitShare })),
      nodes: this.ps.list.map((p, i) => {
        const st = nodeAt(this.model!, i, s), r = runningStat(this.model!, i);
        return { label: p.label, running: st[0] / Math.max(1, st.reduce((a, b) => a + b, 0)), ...r };
      }),
      link: this.link ? [label(this.link[0]), label(this.link[1])] : null,
      bars: bars.map((b) => b.label),
      pies,
      cell: { left: this.layout.left, top: this.layout.top, size: this.layout.cell },
      positions: this.drawn.geo.pos,
    });
  }

  private drawStats(): void {
    const m = this.model!, lines = [`mean ± sd over the window's ${m.steps} steps`];
    this.ps.list.forEach((p, i) => {
      const r = runningStat(m, i);
      lines.push(`${p.label}: running ${pct(r.mean)} ± ${pct(r.sd)}`);
    });
    for (const e of m.edges.values()) {
      const st = edgeStats(e);
      lines.push(`${this.ps.list[e[0].from].label} → ${this.ps.list[e[0].to].label}: ` +
                 `${(st.bytesPerS.mean / 1e3).toFixed(1)} ± ${(st.bytesPerS.sd / 1e3).toFixed(1)} kB/s, ` +
                 `wait ${pct(st.waitShare.mean)} ± ${pct(st.waitShare.sd)}`);
    }
    $('graph-stats').textContent = lines.join('\n');
  }

  private hoverMatrix(x: number, y: number, e: MouseEvent): void {
    const c = this.layout && hitMatrix(this.layout, this.links, x, y);
    if (!c) return this.tip('', null, null);
    this.tip(linkText(this.ps, c), { matrix: { from: this.ps.list[c.from].label, to: this.ps.list[c.to].label,
                                               messages: c.messages, bytes: c.bytes, wait: c.wait } }, e);
  }
  private clickMatrix(x: number, y: number): void {
    const c = this.layout && hitMatrix(this.layout, this.links, x, y);
    if (c) this.selectLink(c.from, c.to, linkText(this.ps, c));
  }
  private selectLink(from: number, to: number, details: string): void {
    this.link = [from, to];
    const a = this.ps.list[from].rows, b = this.ps.list[to].rows;
    this.sel.rows.clear();
    [...a, ...b].forEach((r) => this.sel.rows.add(r));
    this.sel.link = { from: a, to: b };
    $('comm-sel').textContent = `selected: ${this.ps.list[from].label} → ${this.ps.list[to].label}`;
    this.sel.changed(details);
  }
  private hoverGraph(x: number, y: number, e: MouseEvent): void {
    const h = this.drawn && hitGraph(this.drawn, x, y);
    if (!h || !this.model) return this.tip('', null, null);
    if ('node' in h) this.tip(nodeText(this.session, this.ps, this.model, h.node, this.step), { node: h.node }, e);
    else this.tip(edgeText(this.ps, this.model, h.edge, this.step), { edge: h.edge }, e);
  }
  private clickGraph(x: number, y: number): void {
    const h = this.drawn && hitGraph(this.drawn, x, y);
    if (!h || !this.model) return;
    if ('edge' in h) {
      const e = this.model.edges.get(h.edge)![0];
      this.selectLink(e.from, e.to, edgeText(this.ps, this.model, h.edge, this.step));
      return;
    }
    this.link = null;
    this.sel.link = null;
    this.sel.rows.clear();
    this.ps.list[h.node].rows.forEach((r) => this.sel.rows.add(r));
    $('comm-sel').textContent = `selected: ${this.ps.list[h.node].label}`;
    this.sel.changed(nodeText(this.session, this.ps, this.model, h.node, this.step));
  }
}
