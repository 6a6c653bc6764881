// progresscast web page: local times everywhere, and the live card on a session page.
//
// The only HTML this script ever inserts is the fragment the server rendered and
// sanitized (`GET /v1/card` → result.html), through the one Trusted Types policy the
// Content-Security-Policy allows. Everything else (times, notices) goes in as text.
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

  function localizeTimes(root) {
    for (const el of root.querySelectorAll('time.pc-local-time[datetime]')) {
      el.textContent = localTime(el.getAttribute('datetime'));
      el.title = el.getAttribute('datetime');
    }
  }

  function live(root) {
    const card = document.getElementById('pc-card');
    const updated = document.getElementById('pc-updated');
    const noticeEl = document.getElementById('pc-notice');
    const query = new URLSearchParams({
      sessionKey: root.dataset.sessionKey,
      agentId: root.dataset.agentId,
    }).toString();

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
        const response = await fetch('/v1/card?' + query, {
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
