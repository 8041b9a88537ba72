// parmon view in a real browser. Records the ring example on 4 MPI ranks under `parmon record`,
// serves it with `parmon view --port 0`, opens the page in Debian's chromium (headless, driven by
// npm's playwright-core as tests/html does) and checks what a person would see against what the
// API answers:
//   - the execution barscope draws one row per location /api/session lists, with paint in each;
//   - hovering a row shows a tooltip whose state run (duration, ns per state) is one of those
//     /api/timeline gives for the same query, and whose text carries that duration;
//   - the wheel zooms (the visible span shrinks about the pointer), a drag pans (the span stays,
//     the start moves), the + key zooms, and new answers are drawn each time;
//   - the CPU barscope has one row per CPU of the trace's context switches;
//   - clicking a finding sets the visible range to the finding's range and selects its rows;
//   - clicking a thread's stay on a CPU selects that thread (linked selection);
//   - the communication matrix has one cell per communicating pair of ranks, with the messages
//     and bytes of `parmon report --format json`'s links, exactly; hovering a cell shows them;
//     clicking one selects that link (its two ranks' rows in every view);
//   - the process graph has a node per rank on a circle in rank order and the ring's edges
//     r -> r+1; stepping the slider draws that interval's figures, as /api/graph gives them;
//   - per node: a bar per host and rank, a pie per rank summing all the rank's threads;
//   - no JavaScript error; view.png, exec.png, cpus.png, matrix.png, graph.png and nodes.png are
//     written to the output directory.
//
// usage: node view_browser_test.mjs --bin DIR --lib DIR --modules DIR [--out DIR]
// Exit status: 0 pass, 1 fail, 77 skipped (no chromium, playwright-core, MPI example or UI).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  browserOrSkip, check, failures, log, openPage, parseArgs, skip, startViewer, which,
} from './browser_support.mjs';

const args = parseArgs(process.argv);
const { chromiumPath, chromium } = browserOrSkip(args.modules);
const bin = path.resolve(args.bin || '.');
for (const f of ['parmon', 'ring_search'])
  if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin} (ring_search needs MPI)`);
const lib = path.resolve(args.lib || path.join(bin, '..', 'lib'));
if (!fs.existsSync(path.join(lib, 'libparmon_mpi.so'))) skip(`libparmon_mpi.so was not built in ${lib}`);
if (!which('mpirun')) skip('no mpirun in PATH');
const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'parmon-view-')));
fs.mkdirSync(out, { recursive: true });
for (const f of fs.readdirSync(out)) if (f.endsWith('.png')) fs.rmSync(path.join(out, f));

const trace = path.join(out, 'run.ptrace');
fs.rmSync(trace, { force: true, recursive: true });
const argv = [path.join(bin, 'parmon'), 'record', '-q', '-o', trace, '--', 'mpirun', '--allow-run-as-root',
  '--oversubscribe', '-np', '4', path.join(bin, 'ring_search'), '--words', '100', '--db-kb', '1024'];
log(`$ ${argv.join(' ')}`);
const rec = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 300000 });
if (rec.status !== 0) {
  console.log(`FAIL parmon record: ${rec.status ?? rec.signal}\n${rec.stdout}${rec.stderr}`);
  process.exit(1);
}

// parmon view, its URL read from its first line.
const { viewer, url, err: viewErr } = await startViewer(path.join(bin, 'parmon'), trace);
if (!url) {
  console.log(`FAIL parmon view printed no URL\n${viewErr}`);
  process.exit(1);
}
log(`${url} (${viewErr.trim()})`);
const api = async (q) => (await fetch(url + q.replace(/^\//, ''))).json();
const session = await api('/api/session');
const root = await (await fetch(url)).text();
if (root.includes('id="no-ui"')) {
  viewer.kill('SIGTERM');
  skip('this parmon was built without its web UI (no npm/esbuild when cmake ran)');
}

// The report's MPI links of the same trace: the oracle of the matrix.
const rep = spawnSync(path.join(bin, 'parmon'), ['report', trace, '--format', 'json'], { encoding: 'utf8', maxBuffer: 1 << 28 });
const reportLinks = rep.status === 0 ? JSON.parse(rep.stdout).links.filter((k) => k.kind === 'mpi') : [];
const rowsOfRank = (r) => session.rows.filter((x) => x.rank === r).map((x) => x.id);

async function checkComm(page, state, v) {
  const c = v.comm;
  check(c !== null && c.labels.join() === 'rank 0,rank 1,rank 2,rank 3',
        `communication views drawn, a party per rank (${c && c.labels.join(', ')})`);
  if (!c) return;
  // The matrix: a cell per pair, with the report's figures.
  const cellOf = (k) => c.matrix.find((m) => m.from === `rank ${k.from}` && m.to === `rank ${k.to}`);
  const bad = reportLinks.filter((k) => !cellOf(k) || cellOf(k).messages !== k.messages || cellOf(k).bytes !== k.bytes ||
                                       cellOf(k).wait !== k.sender_wait_ns + k.receiver_wait_ns);
  check(reportLinks.length >= 4 && c.matrix.length === reportLinks.length && !bad.length,
        `matrix: ${c.matrix.length} cells = the report's ${reportLinks.length} MPI links, messages, bytes and wait exact ` +
        `(${c.matrix.map((m) => `${m.from}->${m.to} ${m.messages}/${m.bytes} B/${(m.wait / 1e6).toFixed(1)} ms`).join('; ')})` +
        (bad.length ? ` -- differ: ${bad.map((k) => `${k.from}->${k.to} ${k.messages}/${k.bytes} B/` +
                                                    `${k.sender_wait_ns + k.receiver_wait_ns} ns`).join('; ')}` : ''));
  const api = async (q) => (await fetch(url + q.replace(/^\//, ''))).json();
  const mx = await api(`/api/matrix?t0=${v.range.t0}&t1=${v.range.t1}`);
  check(mx.totals.messages === c.matrix.reduce((a, m) => a + m.messages, 0) &&
        mx.totals.bytes === c.matrix.reduce((a, m) => a + m.bytes, 0),
        `matrix: the drawn cells add up to /api/matrix's totals (${mx.totals.messages} messages, ${mx.totals.bytes} bytes)`);
  // Hover, then click, the cell rank 0 -> rank 1.
  await page.locator('#matrix').scrollIntoViewIfNeeded();
  const box = await page.locator('#matrix').boundingBox();
  const at = (from, to) => [box.x + c.cell.left + (to + 0.5) * c.cell.size, box.y + c.cell.top + (from + 0.5) * c.cell.size];
  const target = c.matrix.find((m) => m.from === 'rank 0' && m.to === 'rank 1');
  check(!!target, 'matrix: a cell rank 0 -> rank 1 (the ring\'s first link)');
  if (target) {
    await page.mouse.move(...at(0, 1));
    await page.waitForFunction(() => window.parmonView.hover && window.parmonView.hover.matrix);
    const h = await state();
    check(h.tooltip.includes(`${target.messages} messages, ${target.bytes} bytes`) && h.hover.matrix.from === 'rank 0',
          `matrix tooltip gives the cell's exact figures: ${h.tooltip.split('\n').join(' | ')}`);
    await page.mouse.click(...at(0, 1));
    const s = await state();
    const want = [...rowsOfRank(0), ...rowsOfRank(1)].sort();
    check(JSON.stringify(s.comm.link) === '["rank 0","rank 1"]' && JSON.stringify([...s.selected].sort()) === JSON.stringify(want),
          `clicking the cell selects the link rank 0 -> rank 1 and its ranks' ${want.length} rows in every view`);
  }
  await page.locator('#matrix').screenshot({ path: path.join(out, 'matrix.png') });
  // The graph: the ranks on a circle in rank order, the ring's edges.
  const p = c.positions, cx = p.reduce((a, q) => a + q[0], 0) / p.length, cy = p.reduce((a, q) => a + q[1], 0) / p.length;
  const ang = p.map((q) => Math.atan2(q[1] - cy, q[0] - cx));
  const turns = ang.map((a, i) => (ang[(i + 1) % p.length] - a + 4 * Math.PI) % (2 * Math.PI));
  check(p.length === 4 && turns.every((t) => Math.abs(t - Math.PI / 2) < 0.02),
        `graph: 4 nodes on a circle in rank order (turns ${turns.map((t) => (t * 180 / Math.PI).toFixed(0)).join(', ')} degrees)`);
  const ring = [0, 1, 2, 3].map((r) => c.edges.find((e) => e.from === `rank ${r}` && e.to === `rank ${(r + 1) % 4}`));
  check(ring.every((e) => e && e.messages > 0),
        `graph: the ring's edges r -> r+1 (${c.edges.map((e) => `${e.from}->${e.to} ${e.messages}`).join('; ')})`);
  // The slider: each step drawn is that interval's figures from /api/graph.
  const g = await api(`/api/graph?t0=${v.range.t0}&t1=${v.range.t1}&steps=${c.steps}`);
  const rankOf = new Map(session.rows.map((x) => [x.id, x.rank]));
  const stepFig = (k, from, to) => g.links.filter((l) => rankOf.get(l.from) === from && rankOf.get(l.to) === to)
    .reduce((a, l) => ({ messages: a.messages + l.messages[k], bytes: a.bytes + l.bytes[k], wait: a.wait + l.wait_ns[k] }),
            { messages: 0, bytes: 0, wait: 0 });
  const busy = [...Array(g.steps).keys()].filter((k) => stepFig(k, 0, 1).messages > 0);
  const k = busy.length ? busy[Math.floor(busy.length / 2)] : 0;
  const slide = (to) => page.locator('#graph-step').evaluate((el, to) => {
    el.value = String(to);
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, to);
  await slide(k);
  let s = await state();
  const drawn = s.comm.edges.find((e) => e.from === 'rank 0' && e.to === 'rank 1');
  const want = stepFig(k, 0, 1);
  const stepNs = g.bounds[k + 1] - g.bounds[k];
  check(s.comm.step === k && drawn && drawn.messages === want.messages && drawn.bytes === want.bytes &&
        drawn.wait === want.wait && Math.abs(drawn.bytesPerS - want.bytes / (stepNs / 1e9)) < 1e-6 * drawn.bytesPerS + 1e-9,
        `slider to step ${k + 1} of ${g.steps}: rank 0 -> rank 1 drawn ${drawn && drawn.messages} messages, ` +
        `${drawn && drawn.bytes} B, wait ${drawn && drawn.wait} ns = /api/graph's ${want.messages}, ${want.bytes}, ${want.wait}` +
        ` (the window: ${c.edges.find((e) => e.from === 'rank 0' && e.to === 'rank 1')?.messages} messages)`);
  const other = [...Array(g.steps).keys()].find((j) => stepFig(j, 0, 1).messages !== want.messages);
  if (other !== undefined) {
    await slide(other);
    s = await state();
  }
  const d2 = s.comm.edges.find((e) => e.from === 'rank 0' && e.to === 'rank 1');
  check(other !== undefined && s.comm.step === other && d2.messages === stepFig(other, 0, 1).messages &&
        d2.bytes === stepFig(other, 0, 1).bytes && d2.messages !== drawn.messages,
        `step ${other + 1}: the edge's figures change with the step (${drawn && drawn.messages} -> ${d2 && d2.messages} messages)`);
  check(s.comm.nodes.every((n) => n.sd >= 0 && n.mean >= 0 && n.mean <= 1) && (await page.locator('#graph-stats').textContent()).includes('±'),
        `graph: mean and sd over the window per node (${s.comm.nodes.map((n) => `${n.label} ${(100 * n.mean).toFixed(0)}±${(100 * n.sd).toFixed(0)}%`).join(', ')})`);
  // Per node: a bar per host and per rank; pies per rank summing all its threads at a busy step.
  await slide(k);
  s = await state();
  const ks = s.comm.step;
  const pieWant = [0, 1, 2, 3].map((r) => g.nodes.filter((n) => rankOf.get(n.id) === r)
    .reduce((a, n) => a + n.states[ks].reduce((x, y) => x + y, 0), 0));
  const pieGot = s.comm.pies.map((st) => st.reduce((a, b) => a + b, 0));
  const threadsOf = [0, 1, 2, 3].map((r) => rowsOfRank(r).length);
  check(s.comm.bars.filter((b) => b.startsWith('rank ')).length === 4 && s.comm.bars.some((b) => b.endsWith(': all')) &&
        JSON.stringify(pieGot) === JSON.stringify(pieWant) && pieWant.every((x) => x > 0),
        `per node: bars ${s.comm.bars.join(', ')}; pies per rank over its ${threadsOf.join('/')} threads: ` +
        `${pieGot.map((x) => (x / 1e6).toFixed(1)).join(', ')} ms in step ${ks + 1}`);
  // Play steps on by itself; pause stops it. Threads as nodes: a node per thread.
  const before = (await state()).comm.step;
  await page.locator('#graph-play').click();
  await page.waitForFunction((b) => window.parmonView.comm.step !== b, before);
  await page.locator('#graph-play').click();
  const played = (await state()).comm.step;
  check(played !== before && (await page.locator('#graph-play').textContent()) === 'play',
        `play steps the graph (${before + 1} -> ${played + 1}), pause stops it`);
  await page.locator('#comm-threads').check();
  const th = await state();
  check(th.comm.labels.length === session.rows.length && th.comm.positions.length === session.rows.length,
        `threads as nodes: ${th.comm.labels.length} nodes for ${session.rows.length} threads`);
  await page.locator('#comm-threads').uncheck();
  await slide(k);
  await page.mouse.move(1, 1);  // no tooltip over the pictures
  await page.locator('#graph').screenshot({ path: path.join(out, 'graph.png') });
  await page.locator('#nodes').screenshot({ path: path.join(out, 'nodes.png') });
  await page.locator('#graph-window').click();
  await page.evaluate(() => window.scrollTo(0, 0));  // the barscopes' checks point at the top
}

const { browser, page, errors, state } = await openPage(chromium, chromiumPath, url);
try {
  // Waits until an answer newer than `after` (data-ready counts them) has been drawn.
  const drawnAfter = async (after) => {
    await page.waitForFunction((n) => Number(document.documentElement.dataset.ready || 0) > n, after);
    return state();
  };
  const gen = async () => Number(await page.evaluate(() => document.documentElement.dataset.ready || 0));
  let v = await drawnAfter(0);
  await page.waitForFunction(() => window.parmonView.findings > 0 || document.querySelector('#findings').textContent.includes('No findings'));

  // One row per location the API lists, each with paint.
  const ids = session.rows.map((r) => r.id);
  check(ids.length >= 4 && JSON.stringify(v.execRows) === JSON.stringify(ids),
        `execution barscope: a row per location (${v.execRows.length} drawn, ${ids.length} in /api/session)`);
  const painted = await page.evaluate(({ n }) => {
    const c = document.getElementById('exec'), ctx = c.getContext('2d'), dpr = window.devicePixelRatio || 1;
    const rowH = (c.height / dpr - 20) / n, per = [];
    for (let i = 0; i < n; ++i) {
      const y = Math.round((18 + i * rowH) * dpr), h = Math.max(1, Math.round(rowH * dpr));
      const d = ctx.getImageData(Math.round(150 * dpr), y, c.width - Math.round(150 * dpr), h).data;
      let k = 0;
      for (let j = 0; j < d.length; j += 4) if (d[j + 3] && (Math.abs(d[j] - d[j + 1]) > 30 || Math.abs(d[j + 1] - d[j + 2]) > 30)) ++k;
      per.push(k);
    }
    return per;
  }, { n: ids.length });
  const mainRows = session.rows.map((r, i) => (r.main_thread ? painted[i] : null)).filter((p) => p !== null);
  check(mainRows.length >= 4 && mainRows.every((p) => p > 200),
        `every rank's row is painted in colour (${mainRows.join(', ')} px)`);
  check(v.drawnRuns > 0 && v.drawnSlices > 0 && v.messages > 0,
        `states (${v.drawnRuns} runs), slices (${v.drawnSlices}) and messages (${v.messages}) drawn`);

  await checkComm(page, state, v);

  // A tooltip over rank 0's row: its run is one /api/timeline gives for the same query.
  const box = await page.locator('#exec').boundingBox();
  const r0 = session.rows.findIndex((r) => r.main_thread);
  const rowH = (box.height - 20) / ids.length;
  const tl = await api(`/api/timeline?${v.query}`);
  const row0 = tl.rows.find((r) => r.id === ids[r0]);
  const run = row0.states.reduce((a, r) => (r[1] - r[0] > a[1] - a[0] ? r : a));
  const xOf = (t) => box.x + 150 + ((t - v.range.t0) / (v.range.t1 - v.range.t0)) * (box.width - 150);
  await page.mouse.move(xOf((run[0] + run[1]) / 2), box.y + 18 + r0 * rowH + rowH - 6);
  await page.waitForFunction(() => window.parmonView.hover && window.parmonView.hover.run);
  v = await state();
  const fmt = (ns) => {
    const a = Math.abs(ns);
    if (a >= 1e9) return `${(ns / 1e9).toFixed(a >= 1e10 ? 1 : 3)} s`;
    if (a >= 1e6) return `${(ns / 1e6).toFixed(a >= 1e7 ? 1 : 3)} ms`;
    if (a >= 1e3) return `${(ns / 1e3).toFixed(a >= 1e4 ? 1 : 3)} µs`;
    return `${Math.round(ns)} ns`;
  };
  check(JSON.stringify(v.hover.run) === JSON.stringify(run) && v.tooltip.includes(fmt(run[1] - run[0])) &&
        (await page.locator('#tooltip').isVisible()),
        `tooltip shows the API's run ${JSON.stringify(run)} (${fmt(run[1] - run[0])}): ${v.tooltip.split('\n').slice(0, 3).join(' | ')}`);

  // Wheel zoom about the pointer, then a drag pan, then the + key.
  const before = v.range;
  let g = await gen();
  await page.mouse.wheel(0, -400);
  v = await drawnAfter(g);
  const zoomed = v.range;
  check(zoomed.t1 - zoomed.t0 < (before.t1 - before.t0) * 0.9,
        `wheel zoom: span ${fmt(before.t1 - before.t0)} -> ${fmt(zoomed.t1 - zoomed.t0)}`);
  g = await gen();
  const cx = box.x + 150 + (box.width - 150) / 2, cy = box.y + 30;
  // Dragging right shows earlier times: drag towards the side that has room.
  const dir = zoomed.t0 > session.end - zoomed.t1 ? 1 : -1;
  await page.mouse.move(cx, cy);
  await page.mouse.down();
  await page.mouse.move(cx + dir * 60, cy, { steps: 6 });
  await page.mouse.move(cx + dir * 120, cy, { steps: 6 });
  await page.mouse.up();
  v = await drawnAfter(g);
  check(Math.abs((v.range.t1 - v.range.t0) - (zoomed.t1 - zoomed.t0)) <= 2 &&
        (dir > 0 ? v.range.t0 < zoomed.t0 : v.range.t0 > zoomed.t0),
        `drag pan: start ${fmt(zoomed.t0)} -> ${fmt(v.range.t0)}, span kept`);
  g = await gen();
  await page.locator('#exec').focus();
  await page.keyboard.press('+');
  const keyed = await drawnAfter(g);
  check(keyed.range.t1 - keyed.range.t0 < v.range.t1 - v.range.t0, 'the + key zooms in');
  await page.locator('#exec').screenshot({ path: path.join(out, 'exec.png') });

  // CPU barscope: a row per CPU of the trace.
  check(session.cpus.length > 0 && JSON.stringify(keyed.cpuRows) === JSON.stringify(session.cpus.map((c) => c.cpu)),
        `CPU barscope: a row per CPU (${keyed.cpuRows.length} drawn, ${session.cpus.length} in the trace)`);
  await page.locator('#cpus').screenshot({ path: path.join(out, 'cpus.png') });

  // Clicking a finding lands on its range and selects its rows.
  const findings = (await api('/api/findings')).findings;
  check(findings.length > 0, `findings listed (${findings.length})`);
  if (findings.length) {
    const f = findings[0];
    g = await gen();
    await page.locator('#findings li').first().click();
    v = await drawnAfter(g);
    check(v.range.t0 === f.t0 && v.range.t1 === f.t1 && v.activeFinding === 0 &&
          JSON.stringify([...v.selected].sort()) === JSON.stringify([...f.rows].sort()),
          `finding "${f.id}": range ${fmt(v.range.t0)}-${fmt(v.range.t1)} = ${fmt(f.t0)}-${fmt(f.t1)}, rows ${f.rows}`);
  }
  // Linked selection: clicking a thread's stay on a CPU selects that thread in every view.
  // (Zoomed in with + until stays are wider than a pixel.)
  let cq = await api(`/api/cpus?${v.query}`);
  await page.locator('#cpus').focus();
  for (let i = 0; i < 16 && !cq.cpus.some((c) => c.runs.length); ++i) {
    g = await gen();
    await page.keyboard.press('+');
    v = await drawnAfter(g);
    cq = await api(`/api/cpus?${v.query}`);
  }
  let stay = null;
  cq.cpus.forEach((c, i) => c.runs.forEach((r) => {
    if (!stay || r[1] - r[0] > stay.r[1] - stay.r[0]) stay = { i, r };
  }));
  check(stay !== null, `the CPU barscope has stays to click (${cq.cpus.map((c) => c.runs.length).join(', ')})`);
  if (stay) {
    const cbox = await page.locator('#cpus').boundingBox();
    const x = cbox.x + 150 + (((stay.r[0] + stay.r[1]) / 2 - v.range.t0) / (v.range.t1 - v.range.t0)) * (cbox.width - 150);
    await page.mouse.click(x, cbox.y + 18 + stay.i * 22 + 10);
    const s = await state();
    const label = session.rows.find((r) => r.id === stay.r[2])?.label;
    check(JSON.stringify(s.selected) === JSON.stringify([stay.r[2]]) &&
          (await page.locator('#details').textContent()).includes(label ?? '#'),
          `clicking ${label}'s stay on cpu ${cq.cpus[stay.i].cpu} selects it (${JSON.stringify(s.selected)})`);
  }
  await page.screenshot({ path: path.join(out, 'view.png'), fullPage: true });
  log(`screenshots: ${out}/view.png, exec.png, cpus.png, matrix.png, graph.png, nodes.png`);
  check(!errors.length && !v.errors.length, `no JavaScript errors${errors.length ? ': ' + errors.join('; ') : ''}${v.errors.join('; ')}`);
} finally {
  await browser.close();
  viewer.kill('SIGTERM');
}
const code = await new Promise((resolve) => (viewer.exitCode !== null ? resolve(viewer.exitCode) : viewer.on('exit', (c) => resolve(c))));
check(code === 0, `parmon view exits 0 on SIGTERM (${code})`);
log(failures.length ? `${failures.length} check(s) failed` : 'all checks passed');
process.exit(failures.length ? 1 : 0);
