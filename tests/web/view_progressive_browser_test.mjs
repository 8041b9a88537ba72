// parmon view of a large stored trace in a real browser (docs/web.md, "A large trace"): the page
// first draws the coarse level (the sampler streams: state runs, no slices, the badge saying
// indexing), then, once the complete index is served, draws it without being reloaded (slices,
// CPU runs, messages; the badge says indexed, polling stops).
//   - coarse: 16 rows of state runs, no messages, no CPU rows; complete: the same rows, messages,
//     4 CPU rows, and zoomed in, slices and CPU runs (narrower than a pixel of the whole run);
//   - the trace: view_bench --write-only, 16 ranks, 16 M events (its complete index takes
//     seconds on this 2-CPU VM, the coarse level a fraction of one); `--progressive on`;
//   - chromium is started before parmon view, so that the page is open while it indexes;
//   - the tab's JavaScript heap at most 300 MB (issue 15's target for the tab; logged);
//   - no JavaScript error; coarse.png and complete.png are written to the output directory.
//
// usage: node view_progressive_browser_test.mjs --bin DIR --modules DIR [--out DIR]
// Exit status: 0 pass, 1 fail, 77 skipped (no chromium, playwright-core, view_bench or UI).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { binAndOut, browserOrSkip, check, failures, log, parseArgs, skip, startViewer, TIMEOUT_MS } from './browser_support.mjs';

const args = parseArgs(process.argv);
const { chromiumPath, chromium } = browserOrSkip(args.modules);
const { bin, out } = binAndOut(args, ['parmon', 'view_bench'], 'parmon-view-progressive-');
const trace = path.join(out, 'progressive.ptrace');
const made = spawnSync(path.join(bin, 'view_bench'), ['--write-only', trace, '--events', '16000000'],
  { encoding: 'utf8' });
if (made.status !== 0) {
  console.log(`FAIL view_bench --write-only: ${made.stderr}`);
  process.exit(1);
}
log(`trace: ${made.stdout.trim()}, ${(fs.statSync(trace).size / 1e6).toFixed(1)} MB`);

const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, timeout: TIMEOUT_MS,
                                        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
page.setDefaultTimeout(Number(args.timeout || TIMEOUT_MS));
const errors = [];
page.on('console', (m) => {
  if ((m.type() === 'error' || m.type() === 'warning') && !m.text().startsWith('Canvas2D'))
    errors.push(`console.${m.type()}: ${m.text()}`);
});
page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));

const started = Date.now();
const { viewer, url, err } = await startViewer(path.join(bin, 'parmon'), trace, ['--progressive', 'on']);
let viewerErr = err;
viewer.stderr.on('data', (d) => { viewerErr += d; });
try {
  if (!url) throw new Error(`parmon view printed no URL: ${viewerErr}`);
  if ((await (await fetch(url)).text()).includes('id="no-ui"')) {
    viewer.kill('SIGTERM');
    await browser.close();
    skip('this parmon was built without its web UI');
  }
  await page.goto(url, { waitUntil: 'load' });
  // The tab's JavaScript heap (Chrome's Performance domain, enabled only at the end: while it
  // collects, the page's first drawing was slowed by seconds).
  const heapMb = async () => {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const { metrics } = await cdp.send('Performance.getMetrics');
    return (metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0) / 1e6;
  };
  const state = () => page.evaluate(() => JSON.parse(JSON.stringify({ v: window.parmonView, l: window.parmonLive })));

  // 1. The coarse level, drawn while the complete index is built.
  // Polled from here every 100 ms: waitForFunction's animation-frame polling was seen to return
  // tens of seconds after the page had drawn, on this loaded VM.
  const until = async (what, ms = Number(args.timeout || TIMEOUT_MS)) => {
    for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100)))
      if (await page.evaluate(what)) return;
    throw new Error(`timed out waiting for ${what}`);
  };
  await until(() => window.parmonView && window.parmonView.ready && window.parmonView.drawnRuns > 0);
  const coarse = await state();
  const badge = await page.locator('#live').textContent().catch(() => '');
  // The page stamps its first drawing itself (wall clock, the same machine's): the polling above
  // and the evaluations are not in the figure.
  log(`first drawn ${Math.round(coarse.v.firstDrawnAt - started)} ms after parmon view started`);
  check(coarse.v.firstDrawnAt >= started, 'the page stamped its first drawing');
  check(coarse.l.state === 'indexing' && badge.includes('indexing'),
        `the first drawing is the coarse level: state ${coarse.l.state}, badge "${badge}"`);
  check(coarse.v.execRows.length === 16 && coarse.v.drawnRuns >= 16,
        `coarse: ${coarse.v.execRows.length} rows, ${coarse.v.drawnRuns} state runs`);
  check(coarse.v.messages === 0 && coarse.v.cpuRows.length === 0,
        `coarse: no messages (${coarse.v.messages}) and no CPU rows (${coarse.v.cpuRows.length}) yet`);
  await page.screenshot({ path: path.join(out, 'coarse.png'), fullPage: true });

  // 2. The complete level, drawn in the same page once served.
  await until(() => window.parmonLive.state === 'indexed' && window.parmonView.ready &&
    window.parmonView.messages > 0);
  const complete = await state();
  log(`complete drawn ${Date.now() - started} ms after parmon view started`);
  check(complete.v.execRows.join() === coarse.v.execRows.join(), 'the same rows, in the same order');
  check(complete.v.drawnRuns >= 16 && complete.v.messages > 0 && complete.v.cpuRows.length === 4,
        `complete: ${complete.v.drawnRuns} state runs, ${complete.v.messages} messages, ${complete.v.cpuRows.length} CPU rows`);
  check(complete.v.range.t0 === coarse.v.range.t0 && complete.v.range.t1 === coarse.v.range.t1,
        'the whole run shown in both');
  // The regions and MPI calls (1-5 µs each) are narrower than a pixel of the whole run: zoomed in.
  const box = await page.locator('#exec').boundingBox();
  await page.mouse.move(box.x + 150 + (box.width - 150) * 0.4, box.y + 30);
  for (let i = 0; i < 40 && (await state()).v.drawnSlices === 0; ++i) {
    await page.mouse.wheel(0, -600);
    await new Promise((r) => setTimeout(r, 150));
  }
  await until(() => window.parmonView.ready && window.parmonView.drawnSlices > 0);
  const zoomed = await state();
  check(zoomed.v.drawnSlices > 0 && zoomed.v.drawnCpuRuns > 0,
        `zoomed to ${zoomed.v.range.t1 - zoomed.v.range.t0} ns: ${zoomed.v.drawnSlices} slices, ${zoomed.v.drawnCpuRuns} CPU runs`);
  const session = await (await fetch(`${url}api/session`)).json();
  check(!('live' in session) && !('index' in session), 'the complete session answer has no live or index object');
  const polls = complete.l.polls;
  await new Promise((r) => setTimeout(r, 2500));
  check((await state()).l.polls === polls, `polling stopped after ${polls} polls`);
  await page.screenshot({ path: path.join(out, 'complete.png'), fullPage: true });
  const heap = await heapMb();
  check(heap > 0 && heap <= 300, `the tab's JavaScript heap: ${heap.toFixed(1)} MB (at most 300)`);
  check(errors.length === 0, `no JavaScript error${errors.length ? `: ${errors.join('; ')}` : ''}`);
} catch (e) {
  failures.push(String(e));
  const where = await page.evaluate(() => JSON.stringify({ l: window.parmonLive, v: window.parmonView }))
    .catch(() => '?');
  log(`FAIL ${e}\n${where}\n${errors.join('\n')}\n${viewerErr}`);
} finally {
  viewer.kill('SIGTERM');
  await browser.close();
  fs.rmSync(trace, { force: true });
}
if (failures.length) {
  console.log(`FAILED: ${failures.length} check(s)`);
  process.exit(1);
}
console.log('PASSED');
