// What the browser tests of parmon view share: their checks and log, the command line, finding
// Debian's chromium and npm's playwright-core (skipping, exit 77, without them), starting
// `parmon view --port 0` and reading its URL, and opening the page with its errors collected.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

export const SKIP = 77;
export const TIMEOUT_MS = 180000;  // a busy 2-CPU machine: chromium's start alone has taken seconds
const started = Date.now();
export const log = (m) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${m}`);
export const skip = (why) => { console.log(`SKIPPED: ${why}`); process.exit(SKIP); };
export const failures = [];
export function check(ok, what) {
  if (!ok) failures.push(what);
  log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
}
export function which(name) {
  for (const dir of (process.env.PATH || '').split(':')) {
    try {
      fs.accessSync(path.join(dir || '.', name), fs.constants.X_OK);
      return path.join(dir || '.', name);
    } catch {}
  }
  return null;
}
// --key value pairs.
export function parseArgs(argv) {
  const args = {};
  for (let i = 2; i + 1 < argv.length; i += 2) args[argv[i].slice(2)] = argv[i + 1];
  return args;
}
// chromium's path and playwright-core's chromium, or skip.
export function browserOrSkip(modules) {
  const chromiumPath = process.env.PARMON_CHROMIUM || which('chromium') || which('chromium-browser');
  if (!chromiumPath) skip('no chromium in PATH (Debian: apt-get install chromium)');
  try {
    const require = createRequire(path.join(path.resolve(modules || '.'), 'node_modules', 'index.js'));
    return { chromiumPath, chromium: require('playwright-core').chromium };
  } catch {
    return skip(`playwright-core is not installed in ${modules}/node_modules (cmake runs npm ci there)`);
  }
}
// `parmon view TRACE --port 0 [EXTRA...]`: the process, the URL of its first line (null if none
// came), and its standard error so far.
// A child whose stdout is matched against `re` until it matches (`first` resolves to its first
// group), or null when it exits or after TIMEOUT_MS; its stderr kept in `err`, its exit in `ended`.
export function startChild(argv, re) {
  const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  p.err = '';
  p.stderr.on('data', (d) => { p.err += d; });
  p.first = new Promise((resolve) => {
    let buf = '';
    const timer = setTimeout(() => resolve(null), TIMEOUT_MS);
    p.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(re);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    p.on('exit', () => resolve(null));
  });
  p.ended = new Promise((resolve) => p.on('exit', (c, s) => resolve(c ?? s)));
  return p;
}

export async function startViewer(parmon, trace, extra = []) {
  const viewer = spawn(parmon, ['view', trace, '--port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  const result = { viewer, url: null, err: '' };
  viewer.stderr.on('data', (d) => { result.err += d; });
  result.url = await new Promise((resolve) => {
    let buf = '';
    const timer = setTimeout(() => resolve(null), TIMEOUT_MS);
    viewer.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/^parmon view: (http:\/\/127\.0\.0\.1:\d+\/)\n/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    viewer.on('exit', () => resolve(null));
  });
  return result;
}
// Launches chromium headless and opens url: the browser, the page, the console errors and
// uncaught exceptions it collects, and state() (a copy of window.parmonView).
export async function openPage(chromium, chromiumPath, url) {
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, timeout: TIMEOUT_MS,
                                          args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  context.setDefaultTimeout(TIMEOUT_MS);
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !m.text().startsWith('Canvas2D'))
      errors.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  await page.goto(url, { waitUntil: 'load' });
  const state = () => page.evaluate(() => JSON.parse(JSON.stringify(window.parmonView)));
  return { browser, page, errors, state };
}
// The --bin directory (skipping without the programs `needs`) and the --out directory (made, a
// temporary one named `prefix`... when not given).
export function binAndOut(args, needs, prefix) {
  const bin = path.resolve(args.bin || '.');
  for (const f of needs)
    if (!fs.existsSync(path.join(bin, f))) skip(`${f} was not built in ${bin}`);
  const out = path.resolve(args.out || fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  fs.mkdirSync(out, { recursive: true });
  return { bin, out };
}
