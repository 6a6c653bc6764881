// progresscast web page: local times everywhere, and the live card on a session page.
//
// The only HTML this script ever inserts is what the server rendered and sanitized
// (`GET /v1/card` → result.html and result.historyHtml), through the one Trusted Types
// policy the Content-Security-Policy allows. Everything else (times, durations,
// notices) goes in as text.
//
// The card's controls (an ask's buttons and text box, the run's Stop) are drawn by the
// server only for a viewer who may use them; this script sends them as RPC calls with
// the sign-in cookie and the header `X-Progresscast: 1` (the server takes the cookie
// for those two methods only with it). Stop asks to be pressed again within 10 s.
'use strict';

(() => {
  const EVENTS = ['progressCard.changed', 'activity.changed', 'run.started', 'run.ended', 'ask.changed', 'run.stop'];
  const STOP_CONFIRM_MS = 10000;
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

  // -- the card's controls: answers and Stop ---------------------------------

  const controls = {
    // What to do once a control was used: the live page re-reads its card; a page
    // without one (the session list) reloads.
    after: () => window.location.reload(),
    stopArmedUntil: 0,
    stopTimer: null,
    // A refresh redraws the card: a Stop pressed once stays armed for its 10 s.
    rearm(root) {
      const armed = Date.now() < controls.stopArmedUntil;
      for (const button of root.querySelectorAll('button.pc-stop')) {
        button.textContent = armed ? button.dataset.confirm : button.dataset.label;
        button.classList.toggle('pc-stop--armed', armed);
      }
    },
  };

  function ownerOf(el) {
    const holder = el.closest('[data-session-key]');
    return holder ? { sessionKey: holder.dataset.sessionKey, agentId: holder.dataset.agentId } : null;
  }

  // The `result` of a gateway answer, or an Error with the gateway's reason.
  async function resultOf(response) {
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok || !body || !body.ok) {
      throw new Error(body && body.error ? body.error.message : 'HTTP ' + response.status);
    }
    return body.result;
  }

  async function call(method, params) {
    const response = await fetch('/v1/rpc', {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Progresscast': '1' },
      body: JSON.stringify({ method, params }),
    });
    return resultOf(response);
  }

  function say(askEl, text) {
    const status = askEl.querySelector('.pc-ask__status');
    if (!status) return;
    status.textContent = text;
    status.hidden = !text;
  }

  function busy(askEl, on) {
    for (const el of askEl.querySelectorAll('button, input, textarea')) el.disabled = on;
    askEl.setAttribute('aria-busy', on ? 'true' : 'false');
  }

  async function answer(askEl, params) {
    const owner = ownerOf(askEl);
    if (!owner) return;
    busy(askEl, true);
    say(askEl, '');
    try {
      const result = await call('progressCard.answer', { ...owner, askId: askEl.dataset.askId, ...params });
      if (!result.answered) {
        const ask = result.ask || {};
        const by = ask.answer && ask.answer.by ? ask.answer.by.name || ask.answer.by.user : null;
        say(askEl, by ? 'Already answered by ' + by + '.' : 'This question has ended (' + (ask.state || 'closed') + ').');
      }
      controls.after();
    } catch (err) {
      busy(askEl, false);
      say(askEl, 'Not sent: ' + (err && err.message ? err.message : 'network error'));
    }
  }

  async function stop(button) {
    const owner = ownerOf(button);
    if (!owner) return;
    if (Date.now() >= controls.stopArmedUntil) {
      // The first press only asks to be sure.
      controls.stopArmedUntil = Date.now() + STOP_CONFIRM_MS;
      clearTimeout(controls.stopTimer);
      controls.stopTimer = setTimeout(() => controls.rearm(document), STOP_CONFIRM_MS);
      controls.rearm(document);
      return;
    }
    controls.stopArmedUntil = 0;
    clearTimeout(controls.stopTimer);
    button.disabled = true;
    try {
      await call('run.stop', owner);
    } catch (err) {
      button.disabled = false;
      button.textContent = 'Not stopped: ' + (err && err.message ? err.message : 'network error');
      return;
    }
    controls.after();
  }

  function onClick(event) {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    const option = target.closest('button.pc-ask__option');
    if (option) {
      answer(option.closest('.pc-ask'), { options: [option.dataset.option] });
      return;
    }
    const stopButton = target.closest('button.pc-stop');
    if (stopButton) stop(stopButton);
  }

  function onSubmit(event) {
    const form = event.target instanceof Element ? event.target.closest('form.pc-ask__form') : null;
    if (!form) return;
    event.preventDefault();
    const params = {};
    const chosen = Array.from(form.querySelectorAll('input[name=option]:checked'), (box) => box.value);
    if (chosen.length) params.options = chosen;
    const box = form.querySelector('textarea[name=text]');
    if (box && box.value.trim()) params.text = box.value;
    const askEl = form.closest('.pc-ask');
    if (!params.options && !params.text) {
      say(askEl, box ? 'Type an answer first.' : 'Choose at least one answer first.');
      return;
    }
    answer(askEl, params);
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
      // A refresh must not lose an answer being typed, nor the focus in it.
      const typed = new Map();
      for (const box of card.querySelectorAll('.pc-ask__text')) typed.set(box.id, box.value);
      const focused = document.activeElement && card.contains(document.activeElement) ? document.activeElement.id : null;
      card.innerHTML = policy.createHTML(result.html);
      for (const box of card.querySelectorAll('.pc-ask__text')) {
        if (typed.has(box.id)) box.value = typed.get(box.id);
      }
      if (focused) {
        const again = document.getElementById(focused);
        if (again) again.focus();
      }
      localizeTimes(card);
      controls.rearm(card);
      expiryRefresh();
      minuteRefresh();
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

    // An ask's expiry writes nothing until someone presses: look again when the
    // first open one runs out, so the card says it expired.
    let expiryTimer = null;
    function expiryRefresh() {
      clearTimeout(expiryTimer);
      const ends = Array.from(card.querySelectorAll('.pc-ask--open .pc-ask__expires time[datetime]'),
        (el) => new Date(el.getAttribute('datetime')).getTime()).filter((t) => !Number.isNaN(t));
      if (!ends.length) return;
      const wait = Math.min(...ends) - Date.now() + 1000;
      if (wait > 0 && wait < 2147483647) expiryTimer = setTimeout(refresh, wait);
    }

    // A live run's times change once a minute and write nothing: look again then.
    let minuteTimer = null;
    function minuteRefresh() {
      clearTimeout(minuteTimer);
      const el = card.querySelector('.pc-run[data-refresh-at]');
      if (!el) return;
      const wait = new Date(el.getAttribute('data-refresh-at')).getTime() - Date.now() + 1000;
      if (wait > 0 && wait < 2147483647) minuteTimer = setTimeout(refresh, wait);
      else if (wait <= 0) minuteTimer = setTimeout(refresh, 60000);
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
        if (response.status === 401) {
          throw new Error('your sign-in is no longer valid; reload to sign in');
        }
        show(await resultOf(response));
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
    controls.after = refresh;
    connect();
    // The active step's running time stays current between changes.
    if (history) setInterval(() => tickDurations(history), 10000);
  }

  function start() {
    localizeTimes(document);
    document.addEventListener('click', onClick);
    document.addEventListener('submit', onSubmit);
    const root = document.getElementById('pc-live');
    if (root) live(root);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
