// The Data view (MatVu): each matrix the program recorded with parmon_matrix as a colour map,
// one step at a time (slider, play), on a linear or logarithmic scale, with its legend and a
// tooltip per cell. The server downsamples a step to the canvas's size (/api/data/step: each
// cell a block's mean, min and max); the view follows the visible range (the step recorded last
// by its end) and marks the step's time on the execution barscope.
import { DataList, DataMatrix, DataStep, fmtNs, get, lerpColor, sizeCanvas } from './api';
import { LABEL_W, Scope } from './scope';
import { logFloor, scalePosition, VALUE_SCALE } from './shared';

// What the view drew, for tests (window.parmonView.data).
export interface DataState {
  matrices: number;
  matrix: number;
  step: number;
  steps: number;
  call: number;
  time: number;
  rows: number;
  cols: number;
  outRows: number;
  outCols: number;
  blockRows: number;
  blockCols: number;
  log: boolean;
  floor: number;
  range: [number, number];
  legend: string;
  cell: { left: number; top: number; w: number; h: number };  // geometry, CSS px
  cellsDrawn: number;
  fetched: number;  // answers drawn
  hover: { row: number; col: number; value: number | null } | null;
}

const MAP_H = 420;
const $ = (id: string) => document.getElementById(id)!;
const fmtV = (v: number | null) => (v === null ? 'missing' : Number(v.toPrecision(6)).toString());

export class DataPanel {
  readonly state: DataState = {
    matrices: 0, matrix: 0, step: -1, steps: 0, call: -1, time: -1, rows: 0, cols: 0, outRows: 0,
    outCols: 0, blockRows: 1, blockCols: 1, log: false, floor: 0, range: [0, 0], legend: '',
    cell: { left: 0, top: 0, w: 0, h: 0 }, cellsDrawn: 0, fetched: 0, hover: null,
  };
  private list: DataMatrix[] = [];
  private answer: DataStep | null = null;
  private timer = 0;
  private generation = 0;
  private readonly canvas = $('data-map') as HTMLCanvasElement;
  private readonly slider = $('data-step') as HTMLInputElement;

  constructor(private tip: (text: string, raw: unknown, e: MouseEvent | null) => void,
              private onStep: () => void) {
    this.slider.addEventListener('input', () => { this.stop(); this.setStep(Number(this.slider.value)); });
    $('data-play').addEventListener('click', () => (this.timer ? this.stop() : this.play()));
    $('data-log').addEventListener('change', () => {
      this.state.log = ($('data-log') as HTMLInputElement).checked;
      this.draw();
    });
    $('data-matrix').addEventListener('change', () => {
      this.state.matrix = Number(($('data-matrix') as HTMLSelectElement).value);
      this.setStep(0);
    });
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => this.tip('', null, null));
  }

  async load(): Promise<void> {
    const d = await get<DataList>('/api/data');
    this.list = d.matrices;
    this.state.matrices = d.matrices.length;
    const sel = $('data-matrix') as HTMLSelectElement;
    sel.innerHTML = '';
    for (const m of d.matrices) {
      const o = document.createElement('option');
      o.value = String(m.index);
      o.textContent = `${m.name} (${m.type} ${m.rows}×${m.cols}, ${m.steps} steps, ${m.label})`;
      sel.appendChild(o);
    }
    const notes: string[] = [];
    if (d.unreadable_parts) notes.push(`${d.unreadable_parts} unreadable parts: ${d.first_problem}`);
    $('data-note').textContent = d.matrices.length ? notes.join(' ') :
      'No matrices recorded (the program calls parmon_matrix to show one here).';
    if (!d.matrices.length) $('data').classList.add('empty');
    else this.setStep(0);
  }

  // The step recorded last by time t (the first step when none was yet).
  showAt(t: number): void {
    const m = this.list[this.state.matrix];
    if (!m || this.timer) return;
    let k = 0;
    while (k + 1 < m.times.length && m.times[k + 1] <= t) ++k;
    if (k !== this.state.step) this.setStep(k);
  }

  setStep(step: number): void {
    const m = this.list[this.state.matrix];
    if (!m) return;
    step = Math.max(0, Math.min(m.steps - 1, step));
    this.state.step = step;
    this.state.steps = m.steps;
    this.slider.max = String(m.steps - 1);
    this.slider.value = String(step);
    void this.fetchStep(m, step);
  }

  // A dashed line at the shown step's time on the execution barscope.
  mark(exec: Scope): void {
    const a = this.answer;
    if (!a) return;
    const x = exec.x(a.time);
    if (x < LABEL_W || x > LABEL_W + exec.plotW()) return;
    const c = exec.ctx;
    c.save();
    c.strokeStyle = '#6a1b9a';
    c.setLineDash([4, 3]);
    c.beginPath();
    c.moveTo(x, 0);
    c.lineTo(x, exec.canvas.clientHeight);
    c.stroke();
    c.restore();
  }

  private async fetchStep(m: DataMatrix, step: number): Promise<void> {
    const gen = ++this.generation;
    const w = Math.max(1, Math.min(m.cols, Math.floor(this.canvas.clientWidth || 500), 2048));
    const h = Math.max(1, Math.min(m.rows, MAP_H, 2048));
    try {
      const a = await get<DataStep>(`/api/data/step?matrix=${m.index}&step=${step}&w=${w}&h=${h}`);
      if (gen !== this.generation) return;
      this.answer = a;
      this.state.fetched++;
      this.draw();
      this.onStep();
    } catch (err) {
      $('data-note').textContent = String(err);
    }
  }

  private play(): void {
    $('data-play').textContent = 'pause';
    this.timer = window.setInterval(() => {
      const m = this.list[this.state.matrix];
      if (m) this.setStep((this.state.step + 1) % m.steps);
    }, 600);
  }
  private stop(): void {
    window.clearInterval(this.timer);
    this.timer = 0;
    $('data-play').textContent = 'play';
  }

  draw(): void {
    const a = this.answer;
    if (!a) return;
    const s = this.state;
    const c = sizeCanvas(this.canvas, MAP_H + 44);
    const width = this.canvas.clientWidth || 500;
    const size = Math.max(1, Math.min((width - 20) / a.out_cols, MAP_H / a.out_rows));
    const left = 10, top = 4, floor = logFloor(a.range.min_abs_nonzero, a.range.min, a.range.max);
    Object.assign(s, {
      call: a.call, time: a.time, rows: a.rows, cols: a.cols, outRows: a.out_rows,
      outCols: a.out_cols, blockRows: a.block_rows, blockCols: a.block_cols, floor,
      range: [a.range.min, a.range.max], cell: { left, top, w: size, h: size }, cellsDrawn: 0,
    });
    for (let r = 0; r < a.out_rows; ++r)
      for (let k = 0; k < a.out_cols; ++k) {
        const v = a.mean[r * a.out_cols + k];
        c.fillStyle = v === null ? '#ddd' :
          lerpColor(VALUE_SCALE, scalePosition(v, a.range.min, a.range.max, s.log, floor));
        // Cells overlap by a pixel fraction so that no seams show between them.
        c.fillRect(left + k * size, top + r * size, Math.ceil(size + 0.5), Math.ceil(size + 0.5));
        s.cellsDrawn++;
      }
    this.legend(c, top + a.out_rows * size + 8, width, floor);
    const note = [`step ${a.step + 1}/${s.steps} (call ${a.call}) at ${fmtNs(a.time)}`];
    if (!a.complete) note.push(`${a.missing} elements lost (grey)`);
    if (a.non_finite) note.push(`${a.non_finite} NaN or infinite left out`);
    if (a.block_rows > 1 || a.block_cols > 1)
      note.push(`each cell the mean of ${a.block_rows}×${a.block_cols} elements`);
    $('data-when').textContent = note.join('; ');
  }

  private legend(c: CanvasRenderingContext2D, y: number, width: number, floor: number): void {
    const a = this.answer!, s = this.state, w = Math.min(320, width - 20), x0 = 10;
    for (let i = 0; i < w; ++i) {
      c.fillStyle = lerpColor(VALUE_SCALE, i / (w - 1));
      c.fillRect(x0 + i, y, 1, 12);
    }
    c.fillStyle = '#222';
    const maxAbs = Math.max(Math.abs(a.range.min), Math.abs(a.range.max));
    s.legend = s.log ?
      `log10 |value|: ${fmtV(floor)} … ${fmtV(maxAbs)} (|values| under the floor ${fmtV(floor)}, zero too, at the left)` :
      `value: ${fmtV(a.range.min)} … ${fmtV(a.range.max)}`;
    c.fillText(s.log ? fmtV(floor) : fmtV(a.range.min), x0, y + 24);
    const right = fmtV(s.log ? maxAbs : a.range.max);
    c.fillText(right, x0 + w - c.measureText(right).width, y + 24);
    c.fillText(s.legend, x0 + w + 12, y + 10);
  }

  private hover(e: MouseEvent): void {
    const a = this.answer, g = this.state.cell;
    if (!a) return;
    const b = this.canvas.getBoundingClientRect();
    const k = Math.floor((e.clientX - b.left - g.left) / g.w);
    const r = Math.floor((e.clientY - b.top - g.top) / g.h);
    if (k < 0 || r < 0 || k >= a.out_cols || r >= a.out_rows) {
      this.state.hover = null;
      this.tip('', null, null);
      return;
    }
    const i = r * a.out_cols + k, v = a.mean[i];
    const r0 = r * a.block_rows, c0 = k * a.block_cols;
    const r1 = Math.min(a.rows, r0 + a.block_rows) - 1, c1 = Math.min(a.cols, c0 + a.block_cols) - 1;
    const one = r0 === r1 && c0 === c1;
    this.state.hover = { row: r0, col: c0, value: v };
    const where = one ? `row ${r0}, column ${c0}` : `rows ${r0}–${r1}, columns ${c0}–${c1}`;
    const text = one ? `${a.name} step ${a.step} (call ${a.call})\n${where}\nvalue ${fmtV(v)}` :
      `${a.name} step ${a.step} (call ${a.call})\n${where}\nmean ${fmtV(v)}, min ${fmtV(a.min?.[i] ?? null)}, max ${fmtV(a.max?.[i] ?? null)}`;
    this.tip(text, { row: r0, col: c0, value: v }, e);
  }
}
