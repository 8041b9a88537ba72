// parmon view's page: loads the session, keeps the visible range and the selection every view
// shares, asks the server for what fits the screen whenever the range changes (the newest answer
// wins), and draws. window.parmonView is a read-only summary of what was drawn, for tests.
import {
  Cpus, Finding, fmtNs, get, Graph, Matrix, MessageTuple, Messages, Session, STATE_COLORS, Timeline,
} from './api';
import { CommPanel, CommState, Selection } from './commview';
import { followLive, LiveSession } from './live';
import { DataPanel, DataState } from './dataview';
import { Range, Scope } from './scope';
import { CPU_ROW_H, drawCpus, drawExec, EXEC_ROW_H, Hit, hitCpu, hitExec } from './views';

interface ViewState {
  ready: boolean;
  range: Range;
  execRows: number[];  // location ids drawn, top to bottom
  cpuRows: number[];   // CPU numbers drawn
  drawnSlices: number;
  drawnRuns: number;
  drawnCpuRuns: number;
  firstDrawnAt: number;  // wall-clock ms (the page's clock) when state runs were first drawn; 0 before
  messages: number;
  selected: number[];
  findings: number;
  activeFinding: number;
  tooltip: string;
  hover: unknown;   // what the tooltip describes, as the API gave it
  query: string;   // the t0, t1 and px of the last timeline request
  requests: number;
  errors: string[];
  comm: CommState | null;  // the matrix, graph and per-node views (commview.ts)
  data: DataState | null;  // the data view (dataview.ts)
}

const view: ViewState = {
  ready: false, range: { t0: 0, t1: 1 }, execRows: [], cpuRows: [], drawnSlices: 0,
  drawnRuns: 0, drawnCpuRuns: 0, firstDrawnAt: 0, messages: 0, selected: [], findings: 0, activeFinding: -1,
  tooltip: '', hover: null, query: '', requests: 0, errors: [], comm: null, data: null,
};
const GRAPH_STEPS = 20;
(window as unknown as { parmonView: ViewState }).parmonView = view;

let session: Session;
let timeline: Timeline | null = null;
let cpus: Cpus | null = null;
let messages: MessageTuple[] = [];
let generation = 0;
const selected = new Set<number>();
const selection: Selection = {
  rows: selected, link: null,
  changed: (details) => {
    $('details').textContent = details;
    view.selected = [...selected];
    draw();
  },
};
let comm: CommPanel;
let data: DataPanel | null = null;
const labels = new Map<number, string>();
const $ = (id: string) => document.getElementById(id)!;
const tooltip = $('tooltip');

const MIN_SPAN = 1000;  // 1 µs

function fullRange(): Range { return { t0: 0, t1: Math.max(session.end, 1) }; }

function setRange(r: Range): void {
  const full = fullRange();
  let span = Math.min(Math.max(r.t1 - r.t0, MIN_SPAN), full.t1 - full.t0);
  let t0 = Math.max(full.t0, Math.min(r.t0, full.t1 - span));
  if (!Number.isFinite(t0) || !Number.isFinite(span)) ({ t0 } = full), (span = full.t1);
  view.range = { t0: Math.round(t0), t1: Math.round(t0 + span) };
  $('range').textContent = `${fmtNs(view.range.t0)} – ${fmtNs(view.range.t1)} (${fmtNs(span)})`;
  draw();
  scheduleFetch();
  data?.showAt(view.range.t1);
}

const rangeControl = { get: () => view.range, set: setRange, full: fullRange };
const exec = new Scope($('exec') as HTMLCanvasElement, EXEC_ROW_H, rangeControl,
                       (x, y) => click(hitExec(exec, session, timeline, x, y)),
                       (x, y, e) => hover(hitExec(exec, session, timeline, x, y), e));
const cpuScope = new Scope($('cpus') as HTMLCanvasElement, CPU_ROW_H, rangeControl,
                           (x, y) => click(hitCpu(cpuScope, cpus, labels, x, y)),
                           (x, y, e) => hover(hitCpu(cpuScope, cpus, labels, x, y), e));

function hover(hit: Hit | null, e: MouseEvent): void {
  if (!hit || e.type === 'mouseleave') {
    tooltip.style.display = 'none';
    return;
  }
  showTip(hit.text, hit.raw ?? null, e);
}

function showTip(text: string, raw: unknown, e: MouseEvent | null): void {
  if (!e || !text) {
    tooltip.style.display = 'none';
    return;
  }
  tooltip.textContent = text;
  view.tooltip = text;
  view.hover = raw;
  tooltip.style.display = 'block';
  tooltip.style.left = `${Math.min(e.clientX + 14, window.innerWidth - 340)}px`;
  tooltip.style.top = `${e.clientY + 14}px`;
}

function click(hit: Hit | null): void {
  if (!hit) return;
  $('details').textContent = hit.details;
  selected.clear();
  selection.link = null;
  if (hit.row >= 0) selected.add(hit.row);
  view.selected = [...selected];
  draw();
}

function draw(): void {
  if (!session) return;
  const link = selection.link;
  const e = drawExec(exec, session, timeline, messages, selected,
                     link ? (f, t) => link.from.includes(f) && link.to.includes(t) : null);
  view.execRows = session.rows.map((r) => r.id);
  view.drawnSlices = e.slices;
  view.drawnRuns = e.runs;
  if (e.runs > 0 && !view.firstDrawnAt) view.firstDrawnAt = performance.timeOrigin + performance.now();
  view.drawnCpuRuns = drawCpus(cpuScope, cpus, session.cpus.length, labels, selected);
  view.cpuRows = cpus ? cpus.cpus.map((c) => c.cpu) : [];
  comm.draw();
  view.comm = comm.state.steps ? comm.state : null;
  data?.mark(exec);
}

let fetchTimer = 0;
function scheduleFetch(): void {
  window.clearTimeout(fetchTimer);
  fetchTimer = window.setTimeout(fetchVisible, 30);
}

async function fetchVisible(): Promise<void> {
  const gen = ++generation;
  const { t0, t1 } = view.range;
  const px = Math.max(1, Math.min(session.max_px, Math.round(exec.plotW())));
  const q = `t0=${t0}&t1=${t1}&px=${px}`;
  try {
    view.requests += 5;
    const tlp = get<Timeline>(`/api/timeline?${q}`);
    const cpp = get<Cpus>(`/api/cpus?${q}`);
    const rest = Promise.all([
      get<Messages>(`/api/messages?t0=${t0}&t1=${t1}&limit=2000`),
      get<Matrix>(`/api/matrix?t0=${t0}&t1=${t1}`),
      get<Graph>(`/api/graph?t0=${t0}&t1=${t1}&steps=${GRAPH_STEPS}`)]);
    rest.catch(() => undefined);  // handled below; not an unhandled rejection meanwhile
    // The timeline and CPU rows are drawn as soon as they come; the messages, matrix and graph
    // (slower to compute over a whole large run) when they follow.
    const [tl, cp] = await Promise.all([tlp, cpp]);
    if (gen !== generation) return;  // a newer range was asked for meanwhile
    timeline = tl;
    cpus = cp;
    if (!view.ready) draw();
    const [ms, mx, gr] = await rest;
    if (gen !== generation) return;  // a newer range was asked for meanwhile
    comm.set(mx, gr);
    view.query = q;
    messages = ms.messages;
    view.messages = messages.length;
    draw();
    view.ready = true;
    document.documentElement.dataset.ready = String(gen);
  } catch (err) {
    view.errors.push(String(err));
  }
}

function showFindings(findings: Finding[]): void {
  view.findings = findings.length;
  const list = $('findings');
  list.textContent = '';
  if (!findings.length) list.textContent = 'No findings.';
  findings.forEach((f, i) => {
    const li = document.createElement('li');
    li.textContent = `${f.text} (${f.percent_of_run.toFixed(0)}% of the run; ${fmtNs(f.t0)} – ${fmtNs(f.t1)})`;
    li.title = f.evidence;
    li.dataset.index = String(i);
    li.addEventListener('click', () => {
      list.querySelectorAll('li').forEach((x) => x.classList.remove('active'));
      li.classList.add('active');
      view.activeFinding = i;
      selected.clear();
      selection.link = null;
      f.rows.forEach((r) => selected.add(r));
      view.selected = [...selected];
      $('details').textContent = `${f.text}\n\n${f.evidence}\n\nwhere: ${f.subjects.join(', ')}`;
      setRange({ t0: f.t0, t1: f.t1 });
    });
    list.appendChild(li);
  });
}

// A damaged trace shown from what is intact (`--partial`, or a damaged session of `parmon serve
// --http`): a badge in the header, what is lost in its title and in the details panel.
function showDamage(problems: string[]): void {
  const b = document.createElement('span');
  b.id = 'damage';
  b.style.cssText = 'padding:1px 6px;border-radius:3px;font-weight:bold;background:#c0392b';
  b.textContent = `damaged: ${problems.length} problem${problems.length > 1 ? 's' : ''}`;
  b.title = problems.join('\n');
  document.querySelector('header')!.appendChild(b);
  $('details').textContent = `This trace is damaged; what is shown is what is intact.\n\n${problems.join('\n')}`;
}

async function main(): Promise<void> {
  session = await get<Session>('/api/session');
  $('file').textContent = `${session.file} — ${session.command}`;
  if (session.problems?.length) showDamage(session.problems);
  session.rows.forEach((r) => labels.set(r.id, r.label));
  comm = new CommPanel(session, selection, showTip);
  const dataPanel = new DataPanel(showTip, draw);
  view.data = dataPanel.state;
  $('legend').innerHTML = session.states
    .map((s) => `<span><i style="background:${STATE_COLORS[s]}"></i>${s.replace('_', ' ')}</span>`)
    .join('');
  $('reset').addEventListener('click', () => setRange(fullRange()));
  window.addEventListener('resize', () => { draw(); scheduleFetch(); });
  setRange(fullRange());
  window.clearTimeout(fetchTimer);  // the first range at once: the 30 ms debounce is for moves
  void fetchVisible();
  const firstFindings = get<{ findings: Finding[] }>('/api/findings');
  let followed = false;  // a live update came: its findings are newer than the first ones
  // Started before the rest loads, so that the live badge and state are there by the first
  // drawing.
  followLive({
    session: () => session as LiveSession,
    range: () => view.range,
    update: (fresh, findings, range) => {  // the session grew (live.ts): every view follows
      followed = true;
      Object.assign(session, fresh);
      if (!fresh.live) delete (session as LiveSession).live;  // a stored trace's complete index
      $('file').textContent = `${session.file} — ${session.command}`;
      fresh.rows.forEach((r) => labels.set(r.id, r.label));
      showFindings(findings);
      // The recorded matrices reach the index when the recording ends (index_publish.cc).
      if (!fresh.live || !fresh.live.growing) void dataPanel.load();
      if (range) setRange(range);
      else scheduleFetch();
    },
  });
  await dataPanel.load();
  data = dataPanel;
  const { findings } = await firstFindings;
  if (!followed) showFindings(findings);
}

main().catch((e) => {
  view.errors.push(String(e));
  $('details').textContent = `Could not load the session: ${e}`;
});
