// Following a session still being written (`parmon view --follow`, docs/web.md): asks
// /api/session about once a second and, when the session grew, hands the page the new session
// and the range to show: the end followed only when the view showed the end (like a terminal's
// scroll lock: a user who zoomed or panned into the past keeps their view), the whole run kept
// whole. A badge in the header says live, ended, or what was lost. window.parmonLive is a
// read-only summary for tests.
//
// The same loop serves `parmon view` of a large stored trace (progressive_view.h): its first
// answers are a coarse level (state "indexing"), and once the complete index is served the
// session carries no `live` object any more: the page then asks every view again, once.
import { Finding, fmtNs, get, Session } from './api';
import { Range } from './scope';

export interface LiveInfo {
  following: string; state: string; growing: boolean; complete_until: number; refreshes: number;
  lost: string; problems: string[];
}
export type LiveSession = Session & { live?: LiveInfo };

export interface LiveHooks {
  session: () => LiveSession;
  range: () => Range;
  // The grown session, its findings, and the range to show (null: keep the user's).
  update: (fresh: LiveSession, findings: Finding[], range: Range | null) => void;
}

interface LiveStatus { state: string; end: number; polls: number; updates: number; followed: number; lost: string }
const status: LiveStatus = { state: '', end: 0, polls: 0, updates: 0, followed: 0, lost: '' };
(window as unknown as { parmonLive: LiveStatus }).parmonLive = status;

// The range to show once the session's end moved from oldEnd to newEnd.
export function followRange(r: Range, oldEnd: number, newEnd: number): Range | null {
  const span = r.t1 - r.t0;
  const showsEnd = r.t1 >= oldEnd - Math.max(1, span * 0.01);
  if (!showsEnd || newEnd <= oldEnd) return null;
  if (r.t0 <= 0) return { t0: 0, t1: newEnd };  // the whole run stays whole
  return { t0: Math.max(0, newEnd - span), t1: newEnd };  // the same zoom, at the end
}

function badge(): HTMLElement {
  let b = document.getElementById('live');
  if (!b) {
    b = document.createElement('span');
    b.id = 'live';
    b.style.cssText = 'padding:1px 6px;border-radius:3px;font-weight:bold';
    document.querySelector('header')!.appendChild(b);
  }
  return b;
}

function show(live: LiveInfo, end: number): void {
  const b = badge();
  const colors: Record<string, string> = {
    waiting: '#607d8b', live: '#2e9d3e', indexing: '#b7791f', indexed: '#455a64', ended: '#455a64', lost: '#c0392b', failed: '#c0392b',
  };
  b.style.background = colors[live.state] ?? '#455a64';
  b.dataset.state = live.state;
  const text: Record<string, string> = {
    waiting: `waiting for ${live.following}`,
    live: `● live — complete until ${fmtNs(end)}`,
    indexing: 'indexing — coarse timeline (sampler) until the full index is built',
    indexed: 'indexed',
    ended: `ended (${fmtNs(end)})`,
    lost: `recording lost: ${live.lost}`,
    failed: `stopped following: ${live.lost}`,
  };
  b.textContent = text[live.state] ?? live.state;
  b.title = live.problems.length ? `damage: ${live.problems.join('; ')}` : live.following;
  status.state = live.state;
  status.end = end;
  status.lost = live.lost;
}

export function followLive(h: LiveHooks, periodMs = 1000): void {
  const first = h.session();
  if (!first.live) return;
  show(first.live, first.end);
  let lastEnd = first.end, lastState = first.live.state, lastRows = first.rows.length;
  const poll = async (): Promise<void> => {
    status.polls++;
    try {
      const fresh = await get<LiveSession>('/api/session');
      // No `live` in a stored trace's session: its complete index is served (progressive).
      const live = fresh.live ?? {
        following: first.live!.following, state: 'indexed', growing: false,
        complete_until: fresh.end, refreshes: 0, lost: '', problems: [],
      };
      if (fresh.end !== lastEnd || live.state !== lastState || fresh.rows.length !== lastRows) {
        const findings = (await get<{ findings: Finding[] }>('/api/findings')).findings;
        const range = followRange(h.range(), lastEnd, fresh.end);
        if (range) status.followed++;
        status.updates++;
        lastEnd = fresh.end;
        lastState = live.state;
        lastRows = fresh.rows.length;
        h.update(fresh, findings, range);
      }
      show(live, fresh.end);
      if (!live.growing) return;  // ended, lost or failed: nothing more will come
    } catch (e) {
      status.lost = String(e);  // the server went away: try again, it may be restarting
    }
    window.setTimeout(poll, periodMs);
  };
  window.setTimeout(poll, periodMs);
}
