// The HTML report in a real browser. Records the ring example on 4 MPI ranks under `parmon
// record`, renders `parmon report --format html`, opens the page in Debian's chromium (headless,
// driven over the DevTools protocol by npm's playwright-core, tests/html/package.json) and checks
// what a person would see:
//   - no JavaScript error, uncaught exception or console warning;
//   - every chart the page promises (states per thread, a pie per rank, utilisation over time,
//     and per kind of link the communication matrix and the process graph) has an ECharts
//     instance whose series have data, a canvas of non-zero size, and thousands of painted
//     pixels; the charts carry the run (the ranks' own threads first with the MPI library's
//     helpers and the launcher folded in a row each, a pie per rank summing all its threads, a
//     matrix cell with the bytes of each link, the ring rank r -> rank r+1, a graph node per rank
//     on a circle in rank order, every edge apart);
//   - a 2-rank run's two links, rank 0 -> rank 1 and back, bow to opposite sides of the chord
//     between the ranks (they were drawn on one line, one hiding the other);
//   - heatmap colours follow the values (the largest cell is drawn darker than the smallest);
//   - the page makes no request but for itself (it is one self-contained file): every other
//     request is recorded and cut off;
//   - report.png (the whole page) and chart-<id>.png (each chart) are written to the output
//     directory for a human to look at.
//
// usage: node html_report_test.mjs --bin DIR --lib DIR --modules DIR [--out DIR] [--html FILE]
//   --bin      parmon's build bin directory (parmon, ring_search)
//   --lib      its library directory (libparmon_mpi.so)
//   --modules  the directory whose node_modules holds playwright-core
//   --out      where run.ptrace, report.html and the screenshots go (default: a new temp dir)
//   --html     do not record: check this report (a run that is not the MPI ring fails the checks
//              that are about the ring, but the screenshots are there to look at)
// Environment: PARMON_CHROMIUM, the browser to use (default: chromium in PATH).
// Exit status: 0 pass, 1 fail, 77 skipped, with the reason printed (no chromium, no
// playwright-core, no MPI example, or a parmon built without the charting library).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const SKIP = 77;
// Generous: on a busy 2-CPU machine chromium's start alone has taken seconds.
const BROWSER_TIMEOUT_MS = 180000;
const started = Date.now();

function log(msg) {
  console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
}
function skip(why) {
  console.log(`SKIPPED: ${why}`);
  process.exit(SKIP);
}
const failures = [];
function check(ok, what) {
  if (!ok) failures.push(what);
  log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
}

function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) {
      console.error(`html_report_test: bad argument ${argv[i]}`);
      process.exit(2);
    }
    a[argv[i].slice(2)] = argv[i + 1];
  }
  return a;
}

function which(name) {
  for (const dir of (process.env.PATH || '').split(':')) {
    const p = path.join(dir || '.', name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {}
  }
  return null;
}

// Runs a command to completion; a failure ends the test with its output.
function run(argv, timeoutS) {
  log(`$ ${argv.join(' ')}`);
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: timeoutS * 1000 });
  if (r.error || r.status !== 0) {
    console.log(`FAIL ${argv[0]}: ${r.error ? r.error.message : `exit status ${r.status ?? r.signal}`}`);
    console.log(r.stdout, r.stderr);
    process.exit(1);
  }
  return r.stdout;
}

const args = parseArgs(process.argv.slice(2));
const chromiumPath = process.env.PARMON_CHROMIUM || which('chromium') || which('chromium-browser');
if (!chromiumPath) skip('no chromium in PATH (Debian: apt-get install chromium; scripts/setup.sh installs it)');
let chromium;
try {
  const require = createRequire(path.join(path.resolve(args.modules || '.'), 'node_modules', 'index.js'));
  ({ chromium } = require('playwright-core'));
} catch (e) {
  skip(`playwright-core is not installed in ${args.modules}/node_modules (cmake runs npm ci there ` +
       `from tests/html/package-lock.json when npm exists)`);
}

let html = args.html && path.resolve(args.html);
const bin = path.resolve(args.bin || '.');
if (!html) {
  for (const f of ['parmon', 'ring_search'])
    if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin} (ring_search needs MPI)`);
  const lib = path.resolve(args.lib || path.join(bin, '..', 'lib'));
  if (!fs.existsSync(path.join(lib, 'libparmon_mpi.so'))) skip(`libparmon_mpi.so was not built in ${lib}`);
  if (!which('mpirun')) skip('no mpirun in PATH');
}
const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'parmon-html-')));
fs.mkdirSync(out, { recursive: true });
for (const f of fs.readdirSync(out)) if (f.endsWith('.png')) fs.rmSync(path.join(out, f));
if (!html) {
  const trace = path.join(out, 'run.ptrace');
  html = path.join(out, 'report.html');
  fs.rmSync(trace, { force: true, recursive: true });
  fs.rmSync(html, { force: true });
  // The slow form of the ring on 4 ranks: every rank sends to the next, the last link waits.
  run([path.join(bin, 'parmon'), 'record', '-q', '-o', trace, '--', 'mpirun', '--allow-run-as-root',
       '--oversubscribe', '-np', '4', path.join(bin, 'ring_search'), '--words', '100', '--db-kb', '1024'], 300);
  run([path.join(bin, 'parmon'), 'report', trace, '--format', 'html', '-o', html], 120);
}
if (fs.readFileSync(html, 'utf8').includes('id="no-charts"'))
  skip('this parmon was built without the charting library (no npm when cmake ran)');

log(`opening ${html} in ${chromiumPath}`);
// --no-sandbox: chromium's sandbox needs unprivileged user namespaces or a setuid helper, which
// root and many containers lack; the page is our own file with the network cut off.
const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, timeout: BROWSER_TIMEOUT_MS,
                                        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  // reducedMotion: the page then draws without animation, so what is read back is final.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, reducedMotion: 'reduce' });
  context.setDefaultTimeout(BROWSER_TIMEOUT_MS);
  const page = await context.newPage();
  const url = pathToFileURL(html).href;
  const errors = [], requests = [];
  page.on('console', (m) => {
    // The test's own reading back of canvas pixels makes chromium suggest willReadFrequently.
    if ((m.type() === 'error' || m.type() === 'warning') && !m.text().startsWith('Canvas2D: Multiple readback'))
      errors.push(`console.${m.type()}: ${m.text()}`);
  });
  let died;
  const dead = new Promise((resolve) => { died = resolve; });
  page.on('pageerror', (e) => { errors.push(`uncaught: ${e.message}`); died(); });
  page.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  // Anything but the page itself is recorded (above) and cut off: a report that fetched a
  // script, a style or a font would look right here only by luck.
  await context.route('**/*', (route) => (route.request().url() === url ? route.continue() : route.abort()));
  await page.goto(url, { waitUntil: 'load' });
  // The page marks <html data-charts="N"> when its script has drawn every chart (an uncaught
  // exception means it never will).
  const ran = await Promise.race([
    page.waitForFunction(() => document.documentElement.hasAttribute('data-charts')).then(() => true, () => false),
    dead.then(() => false)]);
  check(ran, 'the chart script ran to its end (<html data-charts>)');

  const report = JSON.parse(await page.locator('#report-data').textContent());
  const kinds = [...new Set(report.links.map((k) => k.kind))];
  const ranks = [...new Set(report.locations.filter((l) => l.rank >= 0).map((l) => l.rank))];
  check(kinds.includes('mpi') && ranks.length === 4,
        `the run has MPI links between 4 ranks (link kinds: ${kinds.join(', ') || 'none'}; ranks: ${ranks.length})`);
  const pies = await page.locator('#pies .pie').count();
  check(ranks.length ? pies === ranks.length : pies > 0, `a pie per node: ${pies}`);
  const expected = ['states', 'util', ...kinds.flatMap((k) => [`matrix-${k}`, `graph-${k}`])];
  for (let i = 0; i < Math.max(1, ranks.length); ++i) expected.push(`pie${i}`);

  // Each chart: its ECharts instance, what it was given, and what it painted.
  const charts = await page.evaluate((ids) => ids.map((id) => {
    const el = document.getElementById(id);
    if (!el) return { id, missing: true };
    const inst = window.echarts && echarts.getInstanceByDom(el);
    const box = el.getBoundingClientRect();
    const r = { id, width: Math.round(box.width), height: Math.round(box.height), instance: !!inst, series: [], painted: 0 };
    if (!inst) return r;
    const opt = inst.getOption();
    const graphs = opt.series.filter((s) => s.type === 'graph');
    r.series = opt.series.map((s) => ({ type: s.type, data: (s.data || []).length }));
    r.xAxis = (opt.xAxis || []).map((a) => a.data || []);
    r.yAxis = (opt.yAxis || []).map((a) => a.data || []);
    r.nodes = graphs.flatMap((s) => s.data.map((d) => d.name));
    r.edges = graphs.flatMap((s) => s.links.map((l) => `${l.source} -> ${l.target}`));
    r.cells = opt.series.filter((s) => s.type === 'heatmap').flatMap((s) => s.data);
    const canvas = el.querySelector('canvas');
    if (canvas) {
      r.canvas = [canvas.width, canvas.height];
      // Pixels that are neither transparent nor near-white: ECharts drew, not just a frame.
      const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 3; i < px.length; i += 4)
        if (px[i] > 0 && (px[i - 3] < 245 || px[i - 2] < 245 || px[i - 1] < 245)) ++r.painted;
    }
    return r;
  }), expected);
  fs.writeFileSync(path.join(out, 'charts.json'), JSON.stringify(charts, null, 1));
  for (const c of charts) {
    if (c.missing) {
      check(false, `chart ${c.id}: no element with this id`);
      continue;
    }
    const wrong = [];
    if (!c.instance) wrong.push('no ECharts instance');
    if (c.width < 150 || c.height < 150) wrong.push('too small');
    if (!c.series.length || !c.series.every((s) => s.data > 0)) wrong.push('a series without data');
    if (!c.canvas || !c.canvas[0] || !c.canvas[1]) wrong.push('no canvas');
    // A chart of a few coloured shapes covers thousands of pixels; axes alone, hundreds.
    if (c.painted < 2000) wrong.push('next to nothing painted');
    check(!wrong.length, `chart ${c.id}: ${c.width}x${c.height} px, series ` +
          `${c.series.map((s) => `${s.type}(${s.data})`).join(' ')}, ${c.painted} px painted` +
          (wrong.length ? ` -- ${wrong.join(', ')}` : ''));
    if (c.instance) await page.locator(`#${c.id}`).screenshot({ path: path.join(out, `chart-${c.id}.png`) });
  }

  // What the charts show is the run.
  const byId = Object.fromEntries(charts.filter((c) => c.instance).map((c) => [c.id, c]));
  // States: the ranks' own threads each a bar, first (a rank's main thread, its process's threads
  // computing >= 10% of their life), the MPI library's helpers and the launcher folded in a row each.
  const all = report.locations.filter((l) => l.kind === 'thread');
  const rankPids = new Set(all.filter((l) => l.rank >= 0).map((l) => l.pid));
  const own = (l) => (l.tid === l.pid && l.rank >= 0) || (rankPids.has(l.pid) && l.wall_ns > 0 && l.compute_ns * 10 >= l.wall_ns);
  const threads = all.filter(own).map((l) => l.label);
  const helpers = all.filter((l) => !own(l) && rankPids.has(l.pid)).length;
  const others = all.filter((l) => !own(l) && !rankPids.has(l.pid)).length;
  if (byId.states) {
    const y = byId.states.yAxis[0];
    check(JSON.stringify(y.slice(0, threads.length)) === JSON.stringify(threads) &&
          y.length === threads.length + (helpers > 0) + (others > 0) &&
          (!helpers || y.includes(`MPI/runtime helpers (${helpers} threads, mean)`)) &&
          [0, 1, 2, 3].every((r) => y.includes(`rank ${r}`)) &&
          byId.states.series.length === report.intervals.state_order.length,
          `states: the ranks' own ${threads.length} threads first, ${helpers} helper and ${others} other ` +
          `threads folded (${y.join(', ')}), a part per state`);
  }
  // A pie per rank sums all the rank's threads, not its main thread alone.
  const pieSums = await page.evaluate((n) => Array.from({ length: n }, (_, i) => {
    const inst = echarts.getInstanceByDom(document.getElementById(`pie${i}`));
    return inst ? inst.getOption().series[0].data.reduce((a, d) => a + d.value, 0) : -1;
  }), ranks.length);
  const rankSums = ranks.sort((a, b) => a - b).map((r) => all.filter((l) => l.rank === r)
    .reduce((a, l) => a + Object.values(l.states_ns).reduce((x, y) => x + y, 0), 0));
  const mainSums = ranks.map((r) => all.filter((l) => l.rank === r && l.tid === l.pid)
    .reduce((a, l) => a + Object.values(l.states_ns).reduce((x, y) => x + y, 0), 0));
  check(pieSums.every((v, i) => Math.abs(v - rankSums[i]) <= 1) && rankSums.some((v, i) => v > mainSums[i]),
        `a pie per rank over all its threads: ${pieSums.map((v) => (v / 1e9).toFixed(3)).join(', ')} s ` +
        `(the ranks' threads: ${rankSums.map((v) => (v / 1e9).toFixed(3)).join(', ')}; main threads alone: ` +
        `${mainSums.map((v) => (v / 1e9).toFixed(3)).join(', ')})`);
  if (byId.util)
    check(byId.util.cells.length === (report.intervals.locations.length + report.intervals.links.length) * report.intervals.count,
          `utilisation: a cell per location or link and interval (${byId.util.cells.length})`);
  const mpi = report.links.filter((k) => k.kind === 'mpi');
  if (byId['matrix-mpi']) {
    const c = byId['matrix-mpi'];
    const cellOf = (k) => c.cells.find((v) => c.xAxis[0][v[0]] === k.to_label && c.yAxis[0][v[1]] === k.from_label);
    check(c.cells.length === mpi.length && mpi.every((k) => cellOf(k) && cellOf(k)[2] === k.bytes),
          `matrix-mpi: a cell with the bytes of each of the ${mpi.length} MPI links`);
    check([0, 1, 2, 3].every((r) => mpi.some((k) => k.from_label === `rank ${r}` && k.to_label === `rank ${(r + 1) % 4}` && k.bytes > 0)),
          'matrix-mpi: the ring, rank r -> rank r+1, is there');
  }
  if (byId['graph-mpi']) {
    const g = byId['graph-mpi'];
    check([0, 1, 2, 3].every((r) => g.nodes.includes(`rank ${r}`)) && g.edges.length === mpi.length,
          `graph-mpi: a node per rank, an edge per link (${g.edges.join(', ')})`);
    // The ring reads as a ring (nodes on a circle in rank order), and every edge is drawn as its
    // own curve: the midpoints of any two edges (A -> B and B -> A included) are apart.
    const geo = await page.evaluate(() => {
      const inst = echarts.getInstanceByDom(document.getElementById('graph-mpi'));
      const graph = inst.getModel().getSeriesByIndex(0).getGraph(), nodes = {}, edges = [];
      graph.eachNode((n) => { nodes[n.id] = n.getLayout(); });
      graph.eachEdge((e) => {
        const [p1, p2, cp] = e.getLayout(), c = cp || [(p1[0] + p2[0]) / 2, (p1[1] + p2[1]) / 2];
        // the quadratic curve's midpoint
        edges.push({ name: `${e.node1.id} -> ${e.node2.id}`, mid: [0.25 * p1[0] + 0.5 * c[0] + 0.25 * p2[0], 0.25 * p1[1] + 0.5 * c[1] + 0.25 * p2[1]] });
      });
      return { nodes, edges };
    });
    const p = [0, 1, 2, 3].map((r) => geo.nodes[`rank ${r}`] || [0, 0]);
    const cx = p.reduce((a, q) => a + q[0], 0) / 4, cy = p.reduce((a, q) => a + q[1], 0) / 4;
    const ang = p.map((q) => Math.atan2(q[1] - cy, q[0] - cx));
    const turns = ang.map((a, i) => ((ang[(i + 1) % 4] - a + 4 * Math.PI) % (2 * Math.PI)));
    check(turns.every((t) => Math.abs(t - Math.PI / 2) < 0.05),
          `graph-mpi: the ranks on a circle in rank order (steps ${turns.map((t) => (t * 180 / Math.PI).toFixed(0)).join(', ')} degrees)`);
    let closest = Infinity;
    geo.edges.forEach((a, i) => geo.edges.slice(i + 1).forEach((b) =>
      (closest = Math.min(closest, Math.hypot(a.mid[0] - b.mid[0], a.mid[1] - b.mid[1])))));
    check(geo.edges.length === mpi.length && closest > 15,
          `graph-mpi: every edge drawn apart (closest midpoints ${closest.toFixed(0)} layout units apart)`);
  }
  // Heatmap colours follow the values: the cell of the largest value is drawn darker than the
  // cell of the smallest (read back from the canvas above the cell's centred label).
  for (const id of ['matrix-mpi', 'util']) {
    if (!byId[id]) continue;
    const shade = await page.evaluate((id) => {
      const el = document.getElementById(id), inst = echarts.getInstanceByDom(el);
      const cells = inst.getOption().series[0].data;
      const lo = cells.reduce((a, c) => (c[2] < a[2] ? c : a)), hi = cells.reduce((a, c) => (c[2] > a[2] ? c : a));
      const ctx = el.querySelector('canvas').getContext('2d'), dpr = window.devicePixelRatio || 1;
      const lum = (c) => {
        const p0 = inst.convertToPixel({ seriesIndex: 0 }, [c[0], c[1]]);
        const p1 = inst.convertToPixel({ seriesIndex: 0 }, [c[0], c[1] + 1]);
        const dy = Math.abs(p1[1] - p0[1]) / 3;
        const d = ctx.getImageData(Math.round(p0[0] * dpr), Math.round((p0[1] - dy) * dpr), 1, 1).data;
        return 0.299 * d[0] + 0.587 * d[1] + 0.114 * d[2];
      };
      return { lo: lo[2], hi: hi[2], loLum: lum(lo), hiLum: lum(hi) };
    }, id);
    check(shade.hi > shade.lo && shade.hiLum < shade.loLum - 60,
          `${id}: the largest value (${shade.hi}) is drawn darker than the smallest (${shade.lo}): ` +
          `luminance ${shade.hiLum.toFixed(0)} vs ${shade.loLum.toFixed(0)}`);
  }

  await page.screenshot({ path: path.join(out, 'report.png'), fullPage: true });
  log(`screenshots: ${out}/report.png and chart-*.png`);
  check(!errors.length, `no JavaScript errors or warnings${errors.length ? ': ' + errors.join('; ') : ''}`);
  check(!requests.length, `no request but for the file itself${requests.length ? ': ' + requests.join(', ') : ''}`);

  // A 2-rank code: the two directions of its one link join nodes facing each other across the
  // circle, where a curve bent toward the centre is a straight line. They must be drawn apart.
  if (!args.html) {
    const trace2 = path.join(out, 'run2.ptrace'), html2 = path.join(out, 'report2.html');
    fs.rmSync(trace2, { force: true, recursive: true });
    run([path.join(bin, 'parmon'), 'record', '-q', '-o', trace2, '--', 'mpirun', '--allow-run-as-root',
         '--oversubscribe', '-np', '2', path.join(bin, 'ring_search'), '--words', '40', '--db-kb', '256'], 300);
    run([path.join(bin, 'parmon'), 'report', trace2, '--format', 'html', '-o', html2], 120);
    const page2 = await context.newPage();
    await context.route(pathToFileURL(html2).href, (route) => route.continue());
    await page2.goto(pathToFileURL(html2).href, { waitUntil: 'load' });
    await page2.waitForFunction(() => document.documentElement.hasAttribute('data-charts'));
    // Each edge's curve midpoint, as its signed distance from the chord rank 0 -> rank 1 (in chord
    // lengths): the two directions must bow to opposite sides, clear of the chord.
    const two = await page2.evaluate(() => {
      const inst = echarts.getInstanceByDom(document.getElementById('graph-mpi'));
      if (!inst) return null;
      const graph = inst.getModel().getSeriesByIndex(0).getGraph(), nodes = {}, edges = [];
      graph.eachNode((n) => { nodes[n.id] = n.getLayout(); });
      const a = nodes['rank 0'], b = nodes['rank 1'];
      if (!a || !b) return null;
      const d = [b[0] - a[0], b[1] - a[1]], len2 = d[0] * d[0] + d[1] * d[1];
      graph.eachEdge((e) => {
        const [p1, p2, cp] = e.getLayout(), c = cp || [(p1[0] + p2[0]) / 2, (p1[1] + p2[1]) / 2];
        const mid = [0.25 * p1[0] + 0.5 * c[0] + 0.25 * p2[0], 0.25 * p1[1] + 0.5 * c[1] + 0.25 * p2[1]];
        edges.push({ name: `${e.node1.id} -> ${e.node2.id}`,
                     off: (d[0] * (mid[1] - a[1]) - d[1] * (mid[0] - a[0])) / len2 });
      });
      return edges;
    });
    const e01 = two && two.find((e) => e.name === 'rank 0 -> rank 1'), e10 = two && two.find((e) => e.name === 'rank 1 -> rank 0');
    check(e01 && e10 && e01.off * e10.off < 0 && Math.abs(e01.off) > 0.05 && Math.abs(e10.off) > 0.05,
          `2 ranks: rank 0 -> rank 1 and rank 1 -> rank 0 bow to opposite sides of the chord ` +
          `(${e01 ? e01.off.toFixed(3) : '-'} and ${e10 ? e10.off.toFixed(3) : '-'} chord lengths; edges: ` +
          `${two ? two.map((e) => e.name).join(', ') : 'no graph'})`);
    await page2.locator('#graph-mpi').screenshot({ path: path.join(out, 'chart-graph-mpi-2ranks.png') });
  }
} finally {
  await browser.close();
}
log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
