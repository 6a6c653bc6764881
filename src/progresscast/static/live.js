// progresscast web page: local times everywhere, and the live card on a session page.
//
// The only HTML this script ever inserts is what the server rendered and sanitized
// (`GET /v1/card` → result.html and result.historyHtml), through the one Trusted Types
// policy the Content-Security-Policy allows. Everything else (times, durations,
// notices) goes in as text.
'use strict';

(() => {
  const EVENTS = ['progressCard.changed', 'activity.changed', 'run.started', 'run.ended'];
  const FIRST_RETRY_MS = 1000;
  const MAX_RETRY_MS = 30000;

  const passThrough = { createHTML: (html) => html };
  const policy = window.trustedTypes
    ? window.trustedTypes.createPolicy('progresscast-card', passThrough)
    : passThrough;

  function localTime(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return iso;
    return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
  }

  // A history line's time: "10:05" today, with the day before that.
  function clockTime(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return iso;
    const time = date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
    if (date.toDateString() === new Date().toDateString()) return time;
    return date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }) + ' ' + time;
  }

  // How long since `el`'s datetime, in the theme's words the server put on it
  // (data-seconds="{n} s", data-minutes, data-hours, data-days).
  function durationSince(el) {
    const start = new Date(el.getAttribute('datetime')).getTime();
    const words = el.dataset;
    if (Number.isNaN(start) || !words.seconds) return null;
    const fill = (format, values) => format.replace(/\{(\w+)\}/g, (m, name) => (name in values ? String(values[name]) : m));
    const s = Math.max(0, Math.floor((Date.now() - start) / 1000));
    if (s < 60) return fill(words.seconds, { n: s });
    if (s < 3600) return fill(words.minutes, { n: Math.floor(s / 60) });
    if (s < 86400) return fill(words.hours, { h: Math.floor(s / 3600), m: Math.floor((s % 3600) / 60) });
    return fill(words.days, { d: Math.floor(s / 86400), h: Math.floor((s % 86400) / 3600) });
  }

  function localizeTimes(root) {
    for (const el of root.querySelectorAll('time.pc-local-time[datetime]')) {
      el.textContent = localTime(el.getAttribute('datetime'));
      el.title = el.getAttribute('datetime');
    }
    for (const el of root.querySelectorAll('time.pc-clock[datetime]')) {
      el.textContent = clockTime(el.getAttribute('datetime'));
      el.title = localTime(el.getAttribute('datetime'));
    }
    tickDurations(root);
  }

  function tickDurations(root) {
    for (const el of root.querySelectorAll('time.pc-since[datetime]')) {
      const words = durationSince(el);
      if (words !== null) el.textContent = words;
      el.title = localTime(el.getAttribute('datetime'));
    }
  }

  function live(root) {
    const card = document.getElementById('pc-card');
    const history = document.getElementById('pc-history');
    const updated = document.getElementById('pc-updated');
    const noticeEl = document.getElementById('pc-notice');
    const query = new URLSearchParams({
      sessionKey: root.dataset.sessionKey,
      agentId: root.dataset.agentId,
    }).toString();
    // The card fragment with the history's (`history=1`); the event stream takes the owner only.
    const cardQuery = query + (history ? '&history=1' : '');

    // Two things can go wrong independently; the notice shows the more useful one.
    let refreshProblem = null;
    let streamProblem = null;
    function showNotice() {
      const text = refreshProblem || streamProblem;
      noticeEl.textContent = text || '';
      noticeEl.hidden = !text;
      root.classList.toggle('pc-stale', Boolean(refreshProblem));
    }

    function show(result) {
      card.innerHTML = policy.createHTML(result.html);
      if (history && typeof result.historyHtml === 'string') {
        history.innerHTML = policy.createHTML(result.historyHtml);
        localizeTimes(history);
      }
      root.dataset.revision = result.revision === null ? '' : String(result.revision);
      if (result.updatedAt) {
        updated.setAttribute('datetime', result.updatedAt);
        updated.textContent = localTime(result.updatedAt);
        updated.title = result.updatedAt;
      } else {
        updated.removeAttribute('datetime');
        updated.textContent = 'none yet';
      }
    }

    // One refresh at a time; a change arriving meanwhile asks for one more after it.
    let running = false;
    let again = false;
    let retryTimer = null;
    let retryMs = FIRST_RETRY_MS;

    async function refresh() {
      if (running) {
        again = true;
        return;
      }
      running = true;
      clearTimeout(retryTimer);
      retryTimer = null;
      root.setAttribute('aria-busy', 'true');
      try {
        const response = await fetch('/v1/card?' + cardQuery, {
          credentials: 'same-origin',
          cache: 'no-store',
          headers: { Accept: 'application/json' },
        });
        let body = null;
        try {
          body = await response.json();
        } catch (_) {
          body = null;
        }
        if (!response.ok || !body || !body.ok) {
          const reason = body && body.error ? body.error.message : 'HTTP ' + response.status;
          throw new Error(response.status === 401 ? 'your sign-in is no longer valid; reload to sign in' : reason);
        }
        show(body.result);
        retryMs = FIRST_RETRY_MS;
        refreshProblem = null;
      } catch (err) {
        // Keep the last card on screen; say so, and try again with a growing pause.
        const seconds = Math.round(retryMs / 1000);
        refreshProblem = 'Could not refresh the card (' + (err && err.message ? err.message : 'network error') +
          '). Showing the last card; retrying in ' + seconds + ' s…';
        retryTimer = setTimeout(refresh, retryMs);
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      } finally {
        running = false;
        root.removeAttribute('aria-busy');
        showNotice();
        if (again) {
          again = false;
          refresh();
        }
      }
    }

    let source = null;
    function connect() {
      source = new EventSource('/v1/events?' + query);
      for (const type of EVENTS) source.addEventListener(type, refresh);
      // (Re)connected: anything may have changed while we were away.
      source.addEventListener('open', () => {
        streamProblem = null;
        showNotice();
        refresh();
      });
      source.addEventListener('error', () => {
        streamProblem = 'Live updates interrupted; reconnecting…';
        showNotice();
        // EventSource retries by itself unless the server refused it (401/403/…).
        if (source.readyState === EventSource.CLOSED) {
          setTimeout(connect, 5000);
        }
      });
    }

    window.progresscast = { refresh };
    connect();
    // The active step's running time stays current between changes.
    if (history) setInterval(() => tickDurations(history), 10000);
  }

  function start() {
    localizeTimes(document);
    const root = document.getElementById('pc-live');
    if (root) live(root);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
