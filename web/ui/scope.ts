// A barscope's canvas: rows over time with a label column and a time axis, and the gestures that
// change the shared visible range (wheel zoom about the pointer, drag pan, + - arrows Home).
// What is drawn in the rows is the caller's (exec.ts, cpus.ts).
import { fmtNs } from './api';

export interface Range { t0: number; t1: number }

export interface RangeControl {
  get(): Range;
  set(r: Range): void;  // clamps and redraws every view
  full(): Range;
}

export const LABEL_W = 150;
export const AXIS_H = 18;

export class Scope {
  readonly ctx: CanvasRenderingContext2D;
  width = 0;  // CSS pixels
  rowH: number;
  rows = 0;
  private drag: { x: number; range: Range; moved: boolean } | null = null;

  constructor(readonly canvas: HTMLCanvasElement, rowH: number, private range: RangeControl,
              private onClick: (x: number, y: number) => void,
              private onHover: (x: number, y: number, ev: MouseEvent) => void) {
    this.ctx = canvas.getContext('2d')!;
    this.rowH = rowH;
    canvas.addEventListener('wheel', (e) => this.wheel(e), { passive: false });
    canvas.addEventListener('mousedown', (e) => {
      this.drag = { x: e.clientX, range: this.range.get(), moved: false };
      canvas.classList.add('dragging');
    });
    window.addEventListener('mousemove', (e) => this.move(e));
    window.addEventListener('mouseup', (e) => {
      if (!this.drag) return;
      const { moved } = this.drag;
      this.drag = null;
      canvas.classList.remove('dragging');
      if (!moved) {
        const b = canvas.getBoundingClientRect();
        this.onClick(e.clientX - b.left, e.clientY - b.top);
      }
    });
    canvas.addEventListener('mouseleave', () => this.onHover(-1, -1, new MouseEvent('mouseleave')));
    canvas.addEventListener('keydown', (e) => this.key(e));
  }

  plotW(): number { return Math.max(10, this.width - LABEL_W); }
  x(t: number): number {
    const r = this.range.get();
    return LABEL_W + ((t - r.t0) / (r.t1 - r.t0)) * this.plotW();
  }
  t(x: number): number {
    const r = this.range.get();
    return r.t0 + ((x - LABEL_W) / this.plotW()) * (r.t1 - r.t0);
  }
  rowAt(y: number): number {
    const i = Math.floor((y - AXIS_H) / this.rowH);
    return y < AXIS_H || i >= this.rows ? -1 : i;
  }

  // Sizes the canvas for n rows and clears it; returns the plot width in pixels.
  begin(n: number): number {
    this.rows = n;
    const dpr = window.devicePixelRatio || 1;
    this.width = this.canvas.clientWidth || 800;
    const h = AXIS_H + n * this.rowH + 2;
    this.canvas.style.height = `${h}px`;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.clearRect(0, 0, this.width, h);
    this.drawAxis(h);
    return this.plotW();
  }

  label(i: number, text: string, highlight: boolean): void {
    const c = this.ctx, y = AXIS_H + i * this.rowH;
    c.fillStyle = highlight ? '#fff59d' : i % 2 ? '#f4f4f4' : '#fff';
    c.fillRect(0, y, this.width, this.rowH);
    c.fillStyle = '#222';
    c.font = '12px system-ui, sans-serif';
    c.fillText(text.length > 22 ? `${text.slice(0, 21)}…` : text, 4, y + this.rowH / 2 + 4);
  }

  // Clips drawing to the plot area until the returned function is called.
  clipPlot(): () => void {
    this.ctx.save();
    this.ctx.beginPath();
    this.ctx.rect(LABEL_W, 0, this.plotW(), this.canvas.height);
    this.ctx.clip();
    return () => this.ctx.restore();
  }

  private drawAxis(h: number): void {
    const c = this.ctx, r = this.range.get(), span = r.t1 - r.t0;
    const step = 10 ** Math.floor(Math.log10(span / 6));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 8) ?? step * 10;
    c.strokeStyle = '#ddd';
    c.fillStyle = '#555';
    c.font = '11px system-ui, sans-serif';
    for (let t = Math.ceil(r.t0 / nice) * nice; t <= r.t1; t += nice) {
      const x = this.x(t);
      c.beginPath();
      c.moveTo(x, AXIS_H - 4);
      c.lineTo(x, h);
      c.stroke();
      c.fillText(fmtNs(t), x + 2, AXIS_H - 6);
    }
  }

  private wheel(e: WheelEvent): void {
    e.preventDefault();
    const b = this.canvas.getBoundingClientRect();
    const at = this.t(Math.max(LABEL_W, e.clientX - b.left));
    this.zoom(e.deltaY < 0 ? 1 / 1.5 : 1.5, at);
  }

  zoom(factor: number, at: number): void {
    const r = this.range.get();
    this.range.set({ t0: at - (at - r.t0) * factor, t1: at + (r.t1 - at) * factor });
  }

  private move(e: MouseEvent): void {
    const b = this.canvas.getBoundingClientRect();
    if (this.drag) {
      const dx = e.clientX - this.drag.x;
      if (Math.abs(dx) > 2) this.drag.moved = true;
      if (!this.drag.moved) return;
      const r = this.drag.range, dt = (dx / this.plotW()) * (r.t1 - r.t0);
      this.range.set({ t0: r.t0 - dt, t1: r.t1 - dt });
      return;
    }
    const x = e.clientX - b.left, y = e.clientY - b.top;
    if (x >= 0 && y >= 0 && x <= b.width && y <= b.height) this.onHover(x, y, e);
  }

  private key(e: KeyboardEvent): void {
    const r = this.range.get(), span = r.t1 - r.t0, mid = (r.t0 + r.t1) / 2;
    if (e.key === '+' || e.key === '=') this.zoom(1 / 1.5, mid);
    else if (e.key === '-' || e.key === '_') this.zoom(1.5, mid);
    else if (e.key === 'ArrowLeft') this.range.set({ t0: r.t0 - span / 10, t1: r.t1 - span / 10 });
    else if (e.key === 'ArrowRight') this.range.set({ t0: r.t0 + span / 10, t1: r.t1 + span / 10 });
    else if (e.key === 'Home') this.range.set(this.range.full());
    else return;
    e.preventDefault();
  }
}
