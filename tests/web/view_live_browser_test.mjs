// parmon view --follow in a real browser: a program recorded with `parmon record --to` into
// `parmon serve` is followed by `parmon view --follow HOST:PORT/SESSION` and the page is opened
// in Debian's chromium (headless, playwright-core as view_browser_test.mjs) while it runs:
//   - opened before the recording starts, the page says it is waiting for the session;
//   - the page draws while the program runs, with the badge saying live;
//   - it redraws as the session grows: at a later moment the shown end is later, more slices
//     and state runs are drawn, and the visible range (the whole run) grew with it;
//   - zoomed into the past, the view keeps the user's range as the session grows (scroll lock),
//     while the session's end still grows; back on the whole run it follows the end again;
//   - once the recording ends, the badge says ended, polling stops, and the drawn end is the
//     stored session's end (`parmon info`'s duration of the collector's file);
//   - no JavaScript error; live-1.png, live-2.png and ended.png are written to the output directory.
//
// usage: node view_live_browser_test.mjs --bin DIR --modules DIR [--out DIR]
// Exit status: 0 pass, 1 fail, 77 skipped (no chromium, playwright-core, example or UI).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { browserOrSkip, check, failures, log, openPage, parseArgs, skip, startChild, TIMEOUT_MS } from './browser_support.mjs';

const args = parseArgs(process.argv);
const { chromiumPath, chromium } = browserOrSkip(args.modules);
const bin = path.resolve(args.bin || '.');
for (const f of ['parmon', 'duty_cycle'])
  if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin}`);
const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'parmon-view-live-')));
fs.mkdirSync(out, { recursive: true });
for (const f of ['live-1.png', 'live-2.png', 'ended.png']) fs.rmSync(path.join(out, f), { force: true });
const store = path.join(out, 'live-store');
fs.rmSync(store, { force: true, recursive: true });

const start = startChild;
const parmon = path.join(bin, 'parmon');
const serve = start([parmon, 'serve', '--listen', '127.0.0.1:0', '--store', store], /^(\d+)\n/);
const children = [serve];
const stopAll = () => children.forEach((c) => c.exitCode === null && c.kill('SIGTERM'));
const port = await serve.first;
if (!port) {
  console.log(`FAIL parmon serve printed no port\n${serve.err}`);
  process.exit(1);
}
const session = `127.0.0.1:${port}/live`;
// The view is started (and the page opened) before the recording, which it waits for.
let rec = null;
const viewer = start([parmon, 'view', '--follow', session, '--port', '0', '--period', '0.5'],
  /^parmon view: (http:\/\/127\.0\.0\.1:\d+\/)\n/);
children.push(viewer);
const url = await viewer.first;
if (!url) {
  stopAll();
  console.log(`FAIL parmon view --follow printed no URL\n${viewer.err}`);
  process.exit(1);
}
log(`following ${session} at ${url}`);
if ((await (await fetch(url)).text()).includes('id="no-ui"')) {
  stopAll();
  skip('this parmon was built without its web UI');
}

const { browser, page, errors } = await openPage(chromium, chromiumPath, url);
try {
  await page.waitForFunction(() => window.parmonLive && window.parmonLive.state === 'waiting');
  const badge0 = await page.locator('#live').textContent();
  check(badge0.startsWith('waiting for') && badge0.includes(session), `before the recording: "${badge0}"`);
  rec = start([parmon, 'record', '-q', '--to', session, '--', path.join(bin, 'duty_cycle'),
    '--seconds', '10', 'basic'], /^$/);
  children.push(rec);
  const state = () => page.evaluate(() => JSON.parse(JSON.stringify({ v: window.parmonView, l: window.parmonLive })));
  const fmt = (ns) => `${(ns / 1e6).toFixed(1)} ms`;
  // Waits for the page to have drawn an answer after a live update that moved the end past `end`.
  const grownPast = async (end) => {
    await page.waitForFunction((e) => window.parmonLive && window.parmonLive.state === 'live' &&
      window.parmonLive.end > e && window.parmonView.ready, end);
    const g = Number(await page.evaluate(() => document.documentElement.dataset.ready || 0));
    await page.waitForFunction((n) => Number(document.documentElement.dataset.ready || 0) > n, g);
    return state();
  };

  // 1. It draws while the program runs, and says live.
  let s1 = await grownPast(1e9);  // at least a second recorded
  const badge1 = await page.locator('#live').textContent();
  check(rec.exitCode === null, 'the program is still running at the first moment');
  check(s1.l.state === 'live' && badge1.includes('live'), `badge says "${badge1}"`);
  check(s1.v.drawnRuns > 0 && s1.v.execRows.length > 0,
        `drawn while it runs: ${s1.v.execRows.length} rows, ${s1.v.drawnRuns} state runs, ${s1.v.drawnSlices} slices, end ${fmt(s1.l.end)}`);
  check(s1.v.range.t0 === 0 && s1.v.range.t1 === s1.l.end, `the whole run shown (${fmt(s1.v.range.t1)})`);
  await page.screenshot({ path: path.join(out, 'live-1.png'), fullPage: true });

  // 2. It redraws as the session grows: later end, more drawn, the whole run followed.
  const s2 = await grownPast(s1.l.end + 1.5e9);
  check(rec.exitCode === null, 'the program is still running at the second moment');
  check(s2.l.end > s1.l.end && s2.v.range.t1 === s2.l.end && s2.v.range.t0 === 0,
        `the end grew ${fmt(s1.l.end)} -> ${fmt(s2.l.end)} and the view followed it (${fmt(s2.v.range.t1)})`);
  check(s2.v.drawnSlices > s1.v.drawnSlices || s2.v.drawnRuns > s1.v.drawnRuns,
        `more is drawn: slices ${s1.v.drawnSlices} -> ${s2.v.drawnSlices}, state runs ${s1.v.drawnRuns} -> ${s2.v.drawnRuns}`);
  check(s2.l.followed >= 2 && s2.v.requests > s1.v.requests, `followed ${s2.l.followed} times, ${s2.v.requests} requests`);
  await page.screenshot({ path: path.join(out, 'live-2.png'), fullPage: true });

  // 3. Zoomed into the past, the range stays while the session grows (scroll lock).
  const box = await page.locator('#exec').boundingBox();
  await page.mouse.move(box.x + 150 + (box.width - 150) * 0.3, box.y + 30);
  const before = (await state()).v.range;
  await page.mouse.wheel(0, -600);
  await page.waitForFunction((span) => window.parmonView.range.t1 - window.parmonView.range.t0 < span * 0.9,
    before.t1 - before.t0);
  const zoomed = (await state()).v.range;
  const s3 = await grownPast(s2.l.end + 1e9);
  check(s3.v.range.t0 === zoomed.t0 && s3.v.range.t1 === zoomed.t1 && s3.l.end > s2.l.end,
        `zoomed to ${fmt(zoomed.t0)}-${fmt(zoomed.t1)}: kept while the end grew to ${fmt(s3.l.end)}`);
  // Back to the whole run: it follows again.
  await page.locator('#reset').click();
  const s4 = await grownPast(s3.l.end + 5e8);
  check(s4.v.range.t0 === 0 && s4.v.range.t1 === s4.l.end, `whole run again: follows the end (${fmt(s4.v.range.t1)})`);

  // 4. The end: "ended", the stored session's end, polling stopped.
  const recCode = await rec.ended;
  check(recCode === 0, `parmon record --to exited ${recCode}`);
  try {
    await page.waitForFunction(() => window.parmonLive.state === 'ended');
  } catch (e) {  // say where it stopped: still live, or lost or failed (the page stops polling)
    const where = await page.evaluate(() => JSON.stringify(window.parmonLive)).catch(() => '?');
    const badge = await page.locator('#live').textContent().catch(() => '?');
    log(`no "ended": parmonLive ${where}, badge "${badge}"; parmon view stderr: ${viewer.err}`);
    throw e;
  }
  const g = Number(await page.evaluate(() => document.documentElement.dataset.ready || 0));
  await page.waitForFunction((n) => Number(document.documentElement.dataset.ready || 0) > n, g);
  const s5 = await state();
  const badge5 = await page.locator('#live').textContent();
  const info = await (await fetch(url + 'api/session')).json();
  check(badge5.startsWith('ended') && s5.v.range.t1 === info.end && s5.l.end === info.end,
        `badge "${badge5}", the view shows the run to its end ${fmt(info.end)}`);
  const polls = s5.l.polls;
  await new Promise((r) => setTimeout(r, 2500));
  check((await state()).l.polls === polls, 'no more polling once ended');
  await page.screenshot({ path: path.join(out, 'ended.png'), fullPage: true });
  const stored = path.join(store, 'live.ptrace');
  const post = start([parmon, 'view', stored, '--port', '0'], /^parmon view: (http:\/\/127\.0\.0\.1:\d+\/)\n/);
  children.push(post);
  const postUrl = await post.first;
  const postSession = postUrl ? await (await fetch(postUrl + 'api/session')).json() : {};
  check(postSession.end === info.end && postSession.rows.length === info.rows.length,
        `the stored file's view: end ${fmt(postSession.end)}, ${postSession.rows?.length} rows (live: ${fmt(info.end)}, ${info.rows.length})`);
  log(`screenshots: ${out}/live-1.png, live-2.png, ended.png`);
  check(!errors.length && !s5.v.errors.length, `no JavaScript errors${errors.length ? ': ' + errors.join('; ') : ''}${s5.v.errors.join('; ')}`);
} catch (e) {
  check(false, `${e.stack || e}\nview: ${viewer.err}`);
} finally {
  await browser.close();
  stopAll();
}
log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
