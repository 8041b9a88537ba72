// parmon serve --http in a real browser (Debian's chromium, headless, playwright-core as
// view_browser_test.mjs): a collector serving the web UI of its store, with one ended session
// and one being recorded (`parmon record --to`):
//   - the list page at / shows both, ended and live, each with a link;
//   - clicking the ended one opens its page under /s/done/ (the page's requests are relative):
//     it draws the rows `parmon view` of the stored file has (same ids, same labels);
//   - back on the list, clicking the live one: the badge says live, the drawn end grows, then
//     the badge says ended when the collector has the whole session, and the page then shows the
//     rows and the end `parmon view` of the stored file shows;
//   - no JavaScript error; list.png, done.png, live.png, live-ended.png in the output directory.
//
// usage: node serve_http_browser_test.mjs --bin DIR --modules DIR [--out DIR]
// Exit status: 0 pass, 1 fail, 77 skipped (no chromium, playwright-core, example or UI).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { browserOrSkip, check, failures, log, openPage, parseArgs, skip, startViewer, startChild, TIMEOUT_MS } from './browser_support.mjs';

const args = parseArgs(process.argv);
const { chromiumPath, chromium } = browserOrSkip(args.modules);
const bin = path.resolve(args.bin || '.');
for (const f of ['parmon', 'duty_cycle'])
  if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin}`);
const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'parmon-serve-http-')));
fs.mkdirSync(out, { recursive: true });
const store = path.join(out, 'serve-http-store');
fs.rmSync(store, { force: true, recursive: true });
const parmon = path.join(bin, 'parmon');

const start = startChild;
const serve = start([parmon, 'serve', '--listen', '127.0.0.1:0', '--store', store, '--http', '127.0.0.1:0'],
  /^(\d+\nparmon serve: http:\/\/127\.0\.0\.1:\d+\/)\n/);  // the port, then the URL
const children = [serve];
const stopAll = () => children.forEach((c) => c.exitCode === null && c.kill('SIGTERM'));
const [port, url] = ((await serve.first) || '').replace('parmon serve: ', '').split('\n');
if (!url) {
  console.log(`FAIL parmon serve --http printed no URL\n${serve.err}`);
  process.exit(1);
}
const record = (name, seconds) => {
  const p = start([parmon, 'record', '-q', '--to', `127.0.0.1:${port}/${name}`, '--', path.join(bin, 'duty_cycle'),
    '--seconds', String(seconds), 'basic'], /^$/);
  children.push(p);
  return p;
};
const listed = async () => (await (await fetch(url + 'api/sessions')).json()).sessions;
const waitFor = async (cond, what) => {
  const until = Date.now() + TIMEOUT_MS;
  while (Date.now() < until) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  check(false, `timed out waiting for ${what}`);
  return false;
};

const done = record('done', 1);
check(await done.ended === 0, 'the ended session was recorded');
await waitFor(async () => (await listed()).some((s) => s.name === 'done' && s.state === 'ended'), 'done ended');
if ((await (await fetch(url + 's/done/')).text()).includes('id="no-ui"')) {
  stopAll();
  skip('this parmon was built without its web UI');
}
const live = record('live', 20);
await waitFor(async () => (await listed()).some((s) => s.name === 'live' && s.state === 'live'), 'live listed live');

const { browser, page, errors } = await openPage(chromium, chromiumPath, url);
const state = () => page.evaluate(() => JSON.parse(JSON.stringify({ v: window.parmonView, l: window.parmonLive })));
const fmt = (ns) => `${(ns / 1e6).toFixed(1)} ms`;
// `parmon view FILE`'s rows and end: the oracle.
const oracle = async (file) => {
  const v = await startViewer(parmon, file);
  children.push(v.viewer);
  const s = v.url ? await (await fetch(v.url + 'api/session')).json() : { rows: [], end: -1 };
  v.viewer.kill('SIGTERM');
  return s;
};
try {
  // 1. The list.
  const rows = await page.locator('#sessions tbody tr').evaluateAll((trs) =>
    trs.map((tr) => ({ name: tr.dataset.session, state: tr.dataset.state })));
  check(rows.some((r) => r.name === 'done' && r.state === 'ended') &&
        rows.some((r) => r.name === 'live' && r.state === 'live'),
        `the list shows ${JSON.stringify(rows)}`);
  await page.screenshot({ path: path.join(out, 'list.png'), fullPage: true });

  // 2. The ended session, from the list's link: the rows of `parmon view` of its file.
  await page.locator('a', { hasText: 'done' }).first().click();
  await page.waitForFunction(() => window.parmonView && window.parmonView.ready);
  check(page.url() === url + 's/done/', `its page is ${page.url()}`);
  const d = await state();
  const want = await oracle(path.join(store, 'done.ptrace'));
  check(JSON.stringify(d.v.execRows) === JSON.stringify(want.rows.map((r) => r.id)) && d.v.drawnRuns > 0,
        `done: drew rows ${JSON.stringify(d.v.execRows)} (parmon view: ${JSON.stringify(want.rows.map((r) => r.id))}), ${d.v.drawnRuns} state runs`);
  const labels = await page.evaluate(() => fetch('api/session').then((r) => r.json()).then((s) => s.rows.map((r) => r.label)));
  check(JSON.stringify(labels) === JSON.stringify(want.rows.map((r) => r.label)), `the same labels: ${labels.join(', ')}`);
  check(d.v.range.t1 === want.end, `the whole run shown: ${fmt(d.v.range.t1)} (parmon view: ${fmt(want.end)})`);
  await page.screenshot({ path: path.join(out, 'done.png'), fullPage: true });

  // 3. The live session: grows, then ends as the stored file's view.
  await page.goBack();
  await page.locator('a', { hasText: 'live' }).first().click();
  await page.waitForFunction(() => window.parmonLive && window.parmonLive.state === 'live' && window.parmonView.ready);
  const l1 = await state();
  const badge1 = await page.locator('#live').textContent();
  check(badge1.includes('live'), `followed live, the badge says "${badge1}" (${live.exitCode === null ? 'still recording' : 'the recording has just ended'})`);
  await page.waitForFunction((e) => window.parmonLive.end > e, l1.l.end);
  const l2 = await state();
  check(l2.l.end > l1.l.end, `it grows: ${fmt(l1.l.end)} -> ${fmt(l2.l.end)}`);
  await page.screenshot({ path: path.join(out, 'live.png'), fullPage: true });
  check(await live.ended === 0, 'the live session was recorded');
  await page.waitForFunction(() => window.parmonLive.state === 'ended');
  const g = Number(await page.evaluate(() => document.documentElement.dataset.ready || 0));
  await page.waitForFunction((n) => Number(document.documentElement.dataset.ready || 0) > n, g);
  const l3 = await state();
  const wantLive = await oracle(path.join(store, 'live.ptrace'));
  check(JSON.stringify(l3.v.execRows) === JSON.stringify(wantLive.rows.map((r) => r.id)) &&
        l3.l.end === wantLive.end && l3.v.range.t1 === wantLive.end,
        `ended: rows ${JSON.stringify(l3.v.execRows)}, end ${fmt(l3.l.end)} (parmon view: ${JSON.stringify(wantLive.rows.map((r) => r.id))}, ${fmt(wantLive.end)})`);
  await page.screenshot({ path: path.join(out, 'live-ended.png'), fullPage: true });
  check(!errors.length && !l3.v.errors.length, `no JavaScript errors${errors.length ? ': ' + errors.join('; ') : ''}${l3.v.errors.join('; ')}`);
} catch (e) {
  check(false, `${e.stack || e}\nserve: ${serve.err}`);
} finally {
  await browser.close();
  stopAll();
}
log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
