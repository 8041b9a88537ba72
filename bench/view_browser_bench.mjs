// parmon view of a ~1 GB trace in a real browser (issue 15's targets, measured in one run):
//   - the time from starting `parmon view` to the first drawn timeline (target <= 2 s), stamped
//     by the page itself (window.parmonView.firstDrawnAt, the same machine's wall clock);
//   - the server's time per zoom or pan request at p95 (target <= 50 ms): the mouse zooms (wheel)
//     and pans (drag) the timeline; each move's requests carry the server's own time in their
//     Server-Timing header, which the page's resource timing shows; the time from the move to
//     the page's next complete drawing is printed beside it;
//   - the tab's memory (target <= 300 MB, flat in the trace size): the JavaScript heap (Chrome's
//     Performance domain) and the private memory of the browser's renderer processes (/proc);
//   - all of it twice: while the complete index is built behind the coarse level, and once it is
//     served (or, if it is not within --complete-timeout seconds, said so).
// The trace: view_bench --write-only --varied (16 ranks on a ring, times and message sizes drawn
// per iteration, ~3.3 bytes per event: 300 M events make ~1 GB). The server's peak memory
// (VmHWM) is printed too.
//
// usage: node bench/view_browser_bench.mjs --bin BUILD/bin --modules BUILD/tests/html
//          [--events 300000000] [--trace PATH (kept; made when missing)] [--moves 40]
//          [--complete-timeout 900]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { browserOrSkip, log, parseArgs, startViewer, TIMEOUT_MS } from '../tests/web/browser_support.mjs';

const args = parseArgs(process.argv);
const bin = path.resolve(args.bin || 'build/release/bin');
const events = Number(args.events || 300e6);
const moves = Number(args.moves || 40);
const completeTimeoutS = Number(args['complete-timeout'] || 900);
const { chromiumPath, chromium } = browserOrSkip(args.modules || 'build/release/tests/html');
const trace = args.trace || `/tmp/view_browser_bench_${events}.ptrace`;
const made = !fs.existsSync(trace);
if (made) {
  const t = Date.now();
  const r = spawnSync(path.join(bin, 'view_bench'), ['--write-only', trace, '--events', String(events), '--varied'],
    { encoding: 'utf8' });
  if (r.status !== 0) {
    console.log(`view_browser_bench: view_bench failed: ${r.stderr}`);
    process.exit(1);
  }
  log(`generated ${r.stdout.trim()} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
}
const bytes = fs.statSync(trace).size;
log(`trace ${trace}: ${(bytes / 1e9).toFixed(2)} GB, ${events / 1e6} M events asked, ${(bytes / events).toFixed(2)} B/event;` +
    ` ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} load, 2 CPUs`);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] : NaN;
};
const mb = (x) => `${(x / 1e6).toFixed(1)} MB`;
const kbField = (pid, field) => {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+)`, 'm'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch { return 0; }
};
// The memory of the renderer processes below browserPid (/proc/PID/smaps_rollup): their private
// memory (USS, what Chrome's task manager calls the footprint) and proportional share (PSS),
// summed over all renderers (the page's and the browser's spare ones, a few MB each): an upper
// bound of the tab's. RSS would count chromium's shared libraries once per process.
const rendererMemory = (browserPid) => {
  const parent = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* ended */ }
  }
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 64; p = parent.get(p) ?? 0, ++n) if (p === browserPid) return true;
    return false;
  };
  const sum = { uss: 0, pss: 0, renderers: 0 };
  for (const pid of parent.keys()) {
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer') || !under(pid)) continue;
      const r = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      const kb = (f) => Number((r.match(new RegExp(`^${f}:\\s+(\\d+)`, 'm')) || [0, 0])[1]) * 1024;
      sum.uss += kb('Private_Clean') + kb('Private_Dirty');
      sum.pss += kb('Pss');
      ++sum.renderers;
    } catch { /* ended */ }
  }
  return sum;
};

const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, timeout: TIMEOUT_MS,
                                        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
const browserPid = process.pid;  // the browser is this process's child: its renderers are below it
const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
page.setDefaultTimeout(TIMEOUT_MS);
const errors = [];
page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));

const started = Date.now();
const { viewer, url, err } = await startViewer(path.join(bin, 'parmon'), trace);
if (!url) {
  console.log(`view_browser_bench: parmon view printed no URL: ${err}`);
  process.exit(1);
}
const viewerPid = viewer.pid;
const results = {};
try {
  await page.goto(url, { waitUntil: 'load' });
  await page.evaluate(() => performance.setResourceTimingBufferSize(100000));
  const until = async (what, arg, ms = TIMEOUT_MS) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50)))
      if (await page.evaluate(what, arg)) return true;
    return false;
  };
  await until(() => window.parmonView && window.parmonView.firstDrawnAt > 0);
  const first = await page.evaluate(() => window.parmonView.firstDrawnAt);
  results.first = first - started;
  log(`first drawn timeline ${results.first.toFixed(0)} ms after parmon view started`);
  await until(() => window.parmonView.ready);

  const box = await page.locator('#exec').boundingBox();
  const heap = async () => {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const { metrics } = await cdp.send('Performance.getMetrics');
    await cdp.send('Performance.disable');
    await cdp.detach();
    return metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
  };
  let rng = 42;
  const random = () => ((rng = (rng * 1103515245 + 12345) % 2147483648) / 2147483648);
  // One phase: `moves` zooms and pans, each waited for until the page drew its answer.
  const phase = async (name) => {
    await page.evaluate(() => performance.clearResourceTimings());
    const moveMs = [];
    let depth = 0;
    const level = await page.evaluate(() => (window.parmonLive && window.parmonLive.state) || 'indexed');
    for (let i = 0; i < moves; ++i) {
      const gen = Number(await page.evaluate(() => document.documentElement.dataset.ready || 0));
      const x = box.x + 150 + (box.width - 160) * (0.1 + 0.8 * random());
      const y = box.y + 40;
      const t = Date.now();
      const r = random();
      if (depth < 2 || (depth < 14 && r < 0.45)) {        // zoom in
        await page.mouse.move(x, y);
        await page.mouse.wheel(0, -600);
        ++depth;
      } else if (r < 0.7 && depth > 0) {                 // zoom out
        await page.mouse.move(x, y);
        await page.mouse.wheel(0, 600);
        --depth;
      } else {                                           // pan by a fifth of the plot
        const dx = (random() < 0.5 ? -1 : 1) * (box.width - 160) / 5;
        const x0 = Math.min(Math.max(x, box.x + 160 - dx), box.x + box.width - 10 - Math.max(dx, 0));
        await page.mouse.move(x0, y);
        await page.mouse.down();
        await page.mouse.move(x0 + dx, y, { steps: 4 });
        await page.mouse.up();
      }
      if (await until((g) => Number(document.documentElement.dataset.ready || 0) > g && window.parmonView.ready, gen, 120000))
        moveMs.push(Date.now() - t);
    }
    const reqs = await page.evaluate(() => performance.getEntriesByType('resource')
      .filter((e) => /\/api\/(timeline|cpus|messages|matrix|graph)\?/.test(e.name))
      .map((e) => ({ kind: e.name.match(/\/api\/(\w+)/)[1], url: e.name,
                     server: (e.serverTiming.find((s) => s.name === 'handle') || { duration: NaN }).duration,
                     total: e.responseEnd - e.startTime })));
    const server = reqs.map((q) => q.server).filter((v) => !Number.isNaN(v));
    // The three slowest asked again, alone (from here, not the page): their cost without the
    // browser drawing beside them on the same CPUs.
    const again = [];
    for (const q of [...reqs].sort((a, b) => b.server - a.server).slice(0, 3)) {
      const r = await fetch(q.url);
      await r.text();
      const t = (r.headers.get('server-timing') || '').match(/dur=([\d.]+)/);
      again.push(`${q.url.replace(/^.*\/api\//, '')}: ${q.server.toFixed(1)} -> ${t ? t[1] : '?'} ms`);
    }
    const h = await heap();
    const mem = rendererMemory(browserPid);
    const out = {
      level, moves: moveMs.length, requests: server.length, p50: pct(server, 50), p95: pct(server, 95),
      max: pct(server, 100), moveP95: pct(moveMs, 95), heap: h, uss: mem.uss, pss: mem.pss,
      kinds: Object.fromEntries(['timeline', 'cpus', 'messages', 'matrix', 'graph'].map((k) =>
        [k, pct(reqs.filter((q) => q.kind === k).map((q) => q.server), 95)])),
    };
    log(`${name} (served level: ${level}): ${out.moves} of ${moves} moves drawn, ${out.requests} requests;` +
        ` server time p50 ${out.p50.toFixed(1)} ms, p95 ${out.p95.toFixed(1)} ms, max ${out.max.toFixed(1)} ms;` +
        ` p95 by kind ${Object.entries(out.kinds).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')} ms;` +
        ` move to drawn p95 ${out.moveP95} ms; tab JS heap ${mb(h)}; ${mem.renderers} renderers' private memory ${mb(mem.uss)}, PSS ${mb(mem.pss)}`);
    log(`  the slowest, asked again alone: ${again.join('; ')}`);
    return out;
  };
  results.coarse = await phase('while indexing');
  const completeBy = Date.now() + completeTimeoutS * 1000;
  const indexed = await until(() => window.parmonLive && window.parmonLive.state === 'indexed' && window.parmonView.ready,
    undefined, Math.max(1000, completeBy - Date.now()));
  results.completeS = indexed ? (Date.now() - started) / 1000 : NaN;
  log(indexed ? `complete index drawn ${results.completeS.toFixed(1)} s after parmon view started`
              : `the complete index was not served within ${completeTimeoutS} s`);
  if (indexed) {
    await page.click('#reset');
    await until(() => window.parmonView.ready);
    results.complete = await phase('complete index');
  }
  results.serverHwm = kbField(viewerPid, 'VmHWM');
} finally {
  viewer.kill('SIGTERM');
  await browser.close();
  if (made && !args.trace) fs.rmSync(trace, { force: true });
}
const target = (ok) => (ok ? 'met' : 'NOT met');
const phases = [results.coarse, results.complete].filter(Boolean);
const worstP95 = Math.max(...phases.map((p) => p.p95));
const worstTab = Math.max(...phases.map((p) => Math.max(p.heap, p.uss)));
console.log(`view_browser_bench: ${(bytes / 1e9).toFixed(2)} GB, ${events / 1e6} M events; parmon view peak ` +
            `${mb(results.serverHwm)} (${(results.serverHwm / events).toFixed(1)} B/event)`);
console.log(`  first drawn timeline: ${results.first.toFixed(0)} ms (<= 2000): ${target(results.first <= 2000)}`);
console.log(`  server time per zoom/pan request, p95: ${phases.map((p) => `${p.p95.toFixed(1)} ms (${p.level})`).join(', ')}` +
            ` (<= 50): ${target(worstP95 <= 50)}`);
console.log(`  tab memory, the renderers' private memory: ${mb(worstTab)} (<= 300 MB): ${target(worstTab <= 300e6)}`);
console.log(`  complete index: ${Number.isNaN(results.completeS) ? `not within ${completeTimeoutS} s` : `${results.completeS.toFixed(1)} s`}`);
if (errors.length) console.log(`  page errors: ${errors.join('; ')}`);
