// parmon view's Data view in a real browser. Records the Jacobi example (its matrix A every sweep
// through parmon_matrix) under `parmon record`, serves it with `parmon view --port 0`, opens the
// page in Debian's chromium (headless, playwright-core as view_browser_test.mjs) and checks what
// a person would see against the API and the program's own figures:
//   - one matrix, with as many steps as the program recorded (its counts file), drawn at full
//     resolution (one cell per element);
//   - the cell of the step's largest value is painted the scale's top colour, its smallest the
//     bottom colour (linear scale);
//   - hovering a cell shows its row, column and value, the value equal to /api/data/step's;
//   - the slider steps to the last sweep (its call number and time as /api/data lists them, the
//     tooltip's value again the API's), and play steps on by itself;
//   - the log scale changes the colours and says its floor in the legend;
//   - zooming the execution barscope shows the step recorded last by the visible range's end, and
//     the step's time is marked on the barscope;
//   - no JavaScript error; data.png and data_log.png are written to the output directory.
//
// usage: node data_browser_test.mjs --bin DIR --modules DIR [--out DIR]
// Exit status: 0 pass, 1 fail, 77 skipped (no chromium, playwright-core, jacobi or UI).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  browserOrSkip, check, failures, log, openPage, parseArgs, skip, startViewer,
} from './browser_support.mjs';

const args = parseArgs(process.argv);
const { chromiumPath, chromium } = browserOrSkip(args.modules);
const bin = path.resolve(args.bin || '.');
for (const f of ['parmon', 'jacobi'])
  if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin}`);
const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'parmon-data-')));
fs.mkdirSync(out, { recursive: true });

const N = 64;
const trace = path.join(out, 'jacobi.ptrace'), counts = path.join(out, 'jacobi.json');
fs.rmSync(trace, { force: true, recursive: true });
const argv = [path.join(bin, 'parmon'), 'record', '-q', '-o', trace, '--', path.join(bin, 'jacobi'),
  '--n', String(N), '--threads', '2', '--counts', counts];
log(`$ ${argv.join(' ')}`);
const rec = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 300000 });
if (rec.status !== 0) {
  console.log(`FAIL parmon record: ${rec.status ?? rec.signal}\n${rec.stdout}${rec.stderr}`);
  process.exit(1);
}
const oracle = JSON.parse(fs.readFileSync(counts, 'utf8')).results.matrix_steps;

const { viewer, url, err: viewErr } = await startViewer(path.join(bin, 'parmon'), trace);
if (!url) {
  console.log(`FAIL parmon view printed no URL\n${viewErr}`);
  process.exit(1);
}
const api = async (q) => (await fetch(url + q.replace(/^\//, ''))).json();
if ((await (await fetch(url)).text()).includes('id="no-ui"')) {
  viewer.kill('SIGTERM');
  skip('this parmon was built without its web UI (no npm/esbuild when cmake ran)');
}
const list = (await api('/api/data')).matrices;
const stepAnswer = (k) => api(`/api/data/step?matrix=0&step=${k}&w=${N}&h=${N}`);
const fmtV = (v) => Number(v.toPrecision(6)).toString();

const { browser, page, errors, state } = await openPage(chromium, chromiumPath, url);
try {
  await page.waitForFunction(() => window.parmonView.data && window.parmonView.data.fetched > 0);
  await page.waitForFunction(() => Number(document.documentElement.dataset.ready || 0) > 0);
  await page.locator('#data').scrollIntoViewIfNeeded();
  let d = (await state()).data;
  check(list.length === 1 && d.matrices === 1 && d.steps === oracle.length && list[0].steps === oracle.length,
        `one matrix "${list[0]?.name}" with ${d.steps} steps, the program recorded ${oracle.length}`);
  check(d.outRows === N && d.outCols === N && d.cellsDrawn === N * N,
        `drawn at full resolution: ${d.outRows} x ${d.outCols} cells (${d.cellsDrawn} painted)`);

  // Pixel colour at the centre of a cell, from the canvas itself.
  const pixel = (r, c) => page.evaluate(({ r, c }) => {
    const cv = document.getElementById('data-map'), g = window.parmonView.data.cell, dpr = window.devicePixelRatio || 1;
    const x = Math.round((g.left + (c + 0.5) * g.w) * dpr), y = Math.round((g.top + (r + 0.5) * g.h) * dpr);
    return Array.from(cv.getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3));
  }, { r, c });
  const near = (a, b) => a.every((x, i) => Math.abs(x - b[i]) <= 3);
  const argOf = (vals, better) => vals.reduce((best, v, i) => (better(v, vals[best]) ? i : best), 0);
  const hoverCell = async (r, c) => {
    const box = await page.locator('#data-map').boundingBox(), g = (await state()).data.cell;
    await page.mouse.move(box.x + g.left + (c + 0.5) * g.w, box.y + g.top + (r + 0.5) * g.h);
    await page.waitForFunction(({ r, c }) => {
      const h = window.parmonView.data.hover;
      return h && h.row === r && h.col === c;
    }, { r, c });
    return state();
  };

  // The step's own extremes at the two ends of the scale (linear).
  let a = await stepAnswer(d.step);
  const hiAt = argOf(a.mean, (x, y) => x > y), loAt = argOf(a.mean, (x, y) => x < y);
  const top = await pixel(Math.floor(hiAt / N), hiAt % N), bottom = await pixel(Math.floor(loAt / N), loAt % N);
  check(near(top, [253, 231, 37]) && near(bottom, [68, 1, 84]),
        `largest value ${fmtV(a.mean[hiAt])} painted the scale's top (${top}), smallest ${fmtV(a.mean[loAt])} its bottom (${bottom})`);
  // Tooltip: row, column and the API's value.
  let h = await hoverCell(5, 7);
  check(h.data.hover.value === a.mean[5 * N + 7] && h.tooltip.includes('row 5, column 7') &&
        h.tooltip.includes(`value ${fmtV(a.mean[5 * N + 7])}`),
        `tooltip of step ${d.step}: ${h.tooltip.split('\n').join(' | ')} (API: ${a.mean[5 * N + 7]})`);
  const offBefore = await pixel(5, 7);
  await page.locator('#data').screenshot({ path: path.join(out, 'data.png') });

  // Step to the last sweep with the slider.
  const last = oracle.length - 1;
  await page.locator('#data-step').evaluate((el, to) => {
    el.value = String(to);
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, last);
  await page.waitForFunction((k) => window.parmonView.data.step === k && window.parmonView.data.call === k, last);
  await page.waitForFunction((t) => window.parmonView.data.time === t, list[0].times[last]);
  d = (await state()).data;
  a = await stepAnswer(last);
  h = await hoverCell(5, 7);
  check(d.call === oracle[last].step && d.time === list[0].times[last] && h.data.hover.value === a.mean[5 * N + 7],
        `slider to step ${last}: call ${d.call}, time ${d.time} ns, tooltip value ${h.data.hover.value} = API ${a.mean[5 * N + 7]}`);
  const offAfter = await pixel(5, 7);
  check(!near(offBefore, offAfter), `an off-diagonal cell changes colour as the iteration converges (${offBefore} -> ${offAfter})`);

  // Log scale: a diagonal element near 1 (a quarter of the way up the linear scale of a
  // converged step, 0..4) moves near the top of 15 decades of |value|: a greener, lighter colour.
  let dr = 0;
  while (dr + 1 < N && !(Math.abs(a.mean[dr * N + dr]) < 2)) ++dr;
  const linPixel = await pixel(dr, dr);
  await page.locator('#data-log').check();
  await page.waitForFunction(() => window.parmonView.data.log === true);
  d = (await state()).data;
  const logPixel = await pixel(dr, dr);
  check(d.legend.includes('log10 |value|') && d.legend.includes('floor') && logPixel[1] > linPixel[1] + 60,
        `log scale: "${d.legend}"; the cell (${dr}, ${dr}) = ${fmtV(a.mean[dr * N + dr])} repainted ${linPixel} -> ${logPixel}`);
  await page.mouse.move(1, 1);
  await page.locator('#data').screenshot({ path: path.join(out, 'data_log.png') });

  // Play steps on by itself; pause stops it.
  const before = d.step;
  await page.locator('#data-play').click();
  await page.waitForFunction((b) => window.parmonView.data.step !== b, before);
  await page.locator('#data-play').click();
  check((await page.locator('#data-play').textContent()) === 'play', `play steps the view (${before} -> ${(await state()).data.step}), pause stops it`);

  // Linked: zoom the barscope about the time of step 2; the view shows the step recorded last by
  // the range's end, and its time is marked on the barscope.
  await page.evaluate(() => window.scrollTo(0, 0));
  const box = await page.locator('#exec').boundingBox();
  const v0 = await state();
  const xOf = (t, v) => box.x + 150 + ((t - v.range.t0) / (v.range.t1 - v.range.t0)) * (box.width - 150);
  const g0 = Number(await page.evaluate(() => document.documentElement.dataset.ready));
  await page.mouse.move(xOf(list[0].times[2], v0), box.y + 30);
  for (let i = 0; i < 3; ++i) await page.mouse.wheel(0, -200);
  await page.waitForFunction((n) => Number(document.documentElement.dataset.ready || 0) > n, g0);
  const v1 = await state();
  let want = 0;
  while (want + 1 < list[0].times.length && list[0].times[want + 1] <= v1.range.t1) ++want;
  await page.waitForFunction((k) => window.parmonView.data.step === k, want).catch(() => {});
  const d1 = (await state()).data;
  check(v1.range.t1 - v1.range.t0 < v0.range.t1 - v0.range.t0 && d1.step === want,
        `zoomed to ${v1.range.t0}-${v1.range.t1} ns: the view shows step ${d1.step}, the last recorded by the range's end (${want})`);
  await page.waitForFunction((t) => window.parmonView.data.time === t, list[0].times[want]);
  const markX = xOf(list[0].times[want], v1) - box.x;
  const purple = await page.evaluate((x) => {
    const cv = document.getElementById('exec'), dpr = window.devicePixelRatio || 1;
    const px = cv.getContext('2d').getImageData(Math.round(x * dpr) - 2, 0, 5, cv.height).data;
    let n = 0;
    for (let i = 0; i < px.length; i += 4) if (Math.abs(px[i] - 106) < 12 && Math.abs(px[i + 1] - 27) < 12 && Math.abs(px[i + 2] - 154) < 12) ++n;
    return n;
  }, markX);
  check(purple > 10, `the step's time is marked on the execution barscope (${purple} marker pixels at x=${markX.toFixed(0)})`);
  await page.locator('#exec').screenshot({ path: path.join(out, 'data_mark.png') });
  const v = await state();
  check(!errors.length && !v.errors.length, `no JavaScript errors${errors.length ? ': ' + errors.join('; ') : ''}${v.errors.join('; ')}`);
  log(`screenshots: ${out}/data.png, data_log.png, data_mark.png`);
} finally {
  await browser.close();
  viewer.kill('SIGTERM');
}
log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
