// VERA dashboard. Plain JS, no build step.
//
// Safety rule of this file: event data is only ever put in the page with
// textContent / text nodes (el() below), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const MAX_EVENT_ROWS = 2000;
const MAX_LOG_LINES = 5000;

// el builds an element; string children become text nodes.
function el(tag, props, ...kids) {
  const n = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (k === 'class') n.className = v;
      else if (k === 'text') n.textContent = v;
      else if (k === 'title') n.title = v;
      else if (k === 'open') n.open = !!v;
      else if (k === 'type') n.type = v;
      else if (k.startsWith('data-')) n.setAttribute(k, v);
    }
  }
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    n.append(k instanceof Node ? k : String(k));
  }
  return n;
}

function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); }

function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  return d.toLocaleTimeString(undefined, { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

function short(s, n) {
  s = String(s ?? '');
  return s.length > n ? s.slice(0, n) + '…' : s;
}

// ---- token and URL state ----------------------------------------------

const hashParams = new URLSearchParams(location.hash.slice(1));
let token = sessionStorage.getItem('vera-token') || '';
if (hashParams.get('token')) {
  token = hashParams.get('token');
  sessionStorage.setItem('vera-token', token);
  hashParams.delete('token');
}
function saveHash() {
  const h = hashParams.toString();
  history.replaceState(null, '', location.pathname + location.search + (h ? '#' + h : ''));
}
saveHash();
$('token').value = token;
$('token').addEventListener('change', () => {
  token = $('token').value.trim();
  sessionStorage.setItem('vera-token', token);
  init();
});

// get reads the API with the token (reading needs it too).
function get(path) {
  return fetch(path, { headers: { 'X-Vera-Token': token }, credentials: 'same-origin' });
}

// feed opens a live stream; EventSource cannot send headers, so the token
// goes in the query string.
function feed(path) {
  return new EventSource(path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token));
}

async function api(method, path, body) {
  const headers = { 'X-Vera-Token': token };
  const init = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  let j = {};
  try { j = await r.json(); } catch (_) { /* empty body */ }
  return { status: r.status, ok: r.ok, json: j };
}

// ---- connection badge --------------------------------------------------

function setConn(ok, text) {
  const b = $('conn');
  b.textContent = text;
  b.className = 'badge ' + (ok ? 'ok' : 'down');
}

// ---- sessions ------------------------------------------------------------

let sessions = [];
let sessionsTimer = null;
let lifecycleES = null;

async function loadSessions() {
  try {
    const r = await get('/api/sessions');
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || r.statusText);
    sessions = j.sessions || [];
    renderSessions();
    renderTraceLink();
    renderLineage();
    if (!lifecycleES) watchLifecycle(j.last_seq || 0);
  } catch (e) {
    setConn(false, 'sessions: ' + e.message);
  }
}

function scheduleSessions() {
  if (sessionsTimer) return;
  sessionsTimer = setTimeout(() => { sessionsTimer = null; loadSessions(); }, 150);
}

function renderSessions() {
  const ul = $('sessions');
  clear(ul);
  for (const s of sessions) {
    const when = s.submitted_at ? new Date(s.submitted_at).toLocaleString() : 'not started';
    const li = el('li', { 'data-run': s.run_id, title: s.run_id },
      el('span', { class: 'title' }, s.title || '(new session)'),
      el('span', { class: 'meta' }, [s.state, s.outcome, s.submitted_by, when,
        s.eval_id ? 'eval ' + short(s.eval_id, 10) : '',
        s.forked_from ? 'fork of ' + short(s.forked_from, 10) + ' at step ' + (s.fork_at_step || 0) : '',
        s.forks && s.forks.length ? s.forks.length + (s.forks.length === 1 ? ' fork' : ' forks') : ''].filter(Boolean).join(' · ')),
      el('span', { class: 'meta mono' }, ' ' + s.run_id));
    if (cur && cur.id === s.run_id) li.classList.add('selected');
    li.addEventListener('click', () => selectRun(s.run_id));
    ul.append(li);
  }
}

// The session and eval lists follow the run-lifecycle and eval events
// from the point the session list was read (the eval list is read after
// it).
function watchLifecycle(after) {
  const types = 'vera.task.submitted,vera.run.started,vera.run.cancelled,vera.run.finished,vera.eval.*';
  lifecycleES = feed('/api/events?types=' + encodeURIComponent(types) + '&after=' + after);
  lifecycleES.onmessage = (e) => {
    let type = '';
    try { type = String(JSON.parse(e.data).type || ''); } catch (_) { /* reload both */ }
    if (!type.startsWith('vera.eval.')) scheduleSessions();
    if (type === '' || type.startsWith('vera.eval.')) scheduleEvals();
  };
  lifecycleES.onerror = () => setConn(false, 'reconnecting…');
  lifecycleES.onopen = () => setConn(true, 'live');
}

$('new-session').addEventListener('click', async () => {
  const r = await api('POST', '/api/sessions');
  if (!r.ok) { alertMsg(r.json.error || ('HTTP ' + r.status)); return; }
  await loadSessions();
  selectRun(r.json.run_id, 'new');
});

function alertMsg(text) {
  const m = $('start-msg');
  m.textContent = text;
  m.className = 'msg error';
  if (!cur) { $('no-run').textContent = text; }
}

// ---- the selected run -----------------------------------------------------

let cur = null;

function newRunState(id) {
  return {
    id, es: null, submitted: false, state: 'new',
    fork: null, forkPrefix: null, firstAudit: 0, forkButtons: [], config: null,
    calls: new Map(), latest: new Map(), pendingLive: new Map(), liveCall: null, audits: new Map(), eventRows: 0, logLines: 0,
    m: { events: 0, malformed: 0, steps: 0, modelCalls: 0, modelErrors: 0, tokens: {}, tools: 0, toolFailures: 0,
      evidence: 0, notes: 0, repeats: 0, verdicts: 0, auditRounds: 0, lastScore: null, bestScore: null,
      vfCredit: null, vfZone: null, policy: 0, containerLines: 0 },
  };
}

function resetPanels() {
  for (const id of ['events', 'evidence', 'logic', 'audit', 'verifyfast', 'run-metrics']) clear($(id).tBodies[0]);
  clear($('modelio'));
  clear($('live-reply'));
  $('live-reply-box').hidden = true;
  clear($('container-logs'));
  clear($('notes'));
  $('outcome').textContent = '';
  $('start-msg').textContent = '';
  $('event-count').textContent = '';
  $('max-steps').value = '';
  for (const id of MODEL_FIELDS) $(id).value = '';
  $('fork-form').hidden = true;
  $('fork-msg').textContent = '';
  $('lineage').hidden = true;
}

// templateText describes the settings of runs started here; a submitted
// run shows its own settings instead.
let templateText = '';

function settingsText(model, auditor, verifyfast, network) {
  return 'model ' + (model || '(agent default)') + ' · auditor ' + (auditor ? 'on' : 'off') +
    ' · VerifyFast ' + (verifyfast ? 'on' : 'off') + ' · network ' + (network ? 'on' : 'off');
}

function selectRun(id, knownState) {
  if (cur && cur.es) cur.es.close();
  closeEval();
  showView('run');
  hashParams.delete('eval');
  resetPanels();
  $('template').textContent = templateText;
  const run = newRunState(id);
  cur = run;
  hashParams.set('run', id);
  saveHash();
  $('run-id').textContent = id;
  $('no-run').hidden = true;
  $('start-form').hidden = false;
  const s = sessions.find((x) => x.run_id === id);
  const state = knownState || (s ? s.state : 'unknown');
  setRunState(run, state);
  renderTraceLink();
  renderLineage();
  // Editable only for a session known to have no task yet.
  lockTask(state !== 'new', state === 'new' ? '' : 'loading…');
  renderSessions();
  renderRunMetrics(run);

  const es = feed('/api/runs/' + encodeURIComponent(id) + '/events?live=1');
  run.es = es;
  es.onmessage = (e) => {
    if (cur !== run) return;
    let ev;
    try { ev = JSON.parse(e.data); } catch (_) { return; }
    onEvent(run, ev, e.lastEventId);
  };
  es.addEventListener('malformed', (e) => {
    if (cur !== run) return;
    let d = {};
    try { d = JSON.parse(e.data); } catch (_) { /* keep empty */ }
    run.m.malformed++;
    addEventRow(run, e.lastEventId, { type: 'MALFORMED', source: '', time: '', data: d }, 'malformed');
  });
  // Pieces of a reply as it is generated (not stored; the record is
  // vera.model.responded).
  es.addEventListener('live', (e) => {
    if (cur !== run) return;
    let p;
    try { p = JSON.parse(e.data); } catch (_) { return; }
    onLive(run, p);
  });
  es.onopen = () => setConn(true, 'live');
  es.onerror = () => setConn(false, 'reconnecting…');
}

// safeHTTPURL returns u normalised when it is an absolute http(s) URL, else
// null: a link never gets another scheme (javascript:, data:...).
function safeHTTPURL(u) {
  if (typeof u !== 'string' || u === '') return null;
  let parsed;
  try { parsed = new URL(u); } catch (_) { return null; }
  return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null;
}

// renderTraceLink shows a "Trace" link to the selected run's trace in the
// trace UI when the server has one (trace_url in the session list), and
// nothing otherwise.
function renderTraceLink() {
  const box = $('trace-link-box');
  clear(box);
  if (!cur) return;
  const s = sessions.find((x) => x.run_id === cur.id);
  const href = s ? safeHTTPURL(s.trace_url) : null;
  if (!href) return;
  const a = el('a', { class: 'trace-link', title: 'trace ' + (s.trace_id || '') + ' in the trace UI' }, 'Trace');
  a.id = 'trace-link';
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  box.append(a);
}

function setRunState(run, state) {
  run.state = state;
  const b = $('run-state');
  b.textContent = state;
  $('cancel').hidden = !(state === 'submitted' || state === 'running');
}

function lockTask(locked, text) {
  const t = $('task');
  t.readOnly = locked;
  if (text !== undefined) t.value = text;
  $('start').disabled = locked;
  $('max-steps').readOnly = locked;
  for (const id of MODEL_FIELDS) $(id).disabled = locked;
  $('start').textContent = locked ? 'Started (locked)' : 'Start run';
}

$('start-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  if (!cur || $('task').readOnly) return;
  const run = cur;
  const body = { task: $('task').value };
  const ms = $('max-steps').value.trim();
  if (ms !== '') body.max_steps = parseInt(ms, 10);
  const model = modelSettingsFromForm();
  if (Object.keys(model).length > 0) body.model = model;
  $('start').disabled = true;
  const r = await api('POST', '/api/runs/' + encodeURIComponent(run.id) + '/start', body);
  if (r.status === 201 || r.status === 409) {
    lockTask(true);
    if (r.status === 409) alertMsg(r.json.error || 'already started');
    else { $('start-msg').textContent = 'submitted (event ' + r.json.event_id + ')'; $('start-msg').className = 'msg'; }
    if (run.state === 'new') setRunState(run, 'submitted');
    scheduleSessions();
    return;
  }
  $('start').disabled = false;
  alertMsg(r.status === 401 ? 'Enter the token printed by vera at start (top right).' : (r.json.error || ('HTTP ' + r.status)));
});

$('cancel').addEventListener('click', async () => {
  if (!cur) return;
  const r = await api('POST', '/api/runs/' + encodeURIComponent(cur.id) + '/cancel', { reason: 'cancelled from the dashboard' });
  if (!r.ok) alertMsg(r.status === 401 ? 'Enter the token printed by vera at start (top right).' : (r.json.error || ('HTTP ' + r.status)));
});

// ---- events ----------------------------------------------------------------

// diffStat counts the added and removed lines of a unified diff: "+N/-M".
function diffStat(diff) {
  let add = 0, del = 0;
  for (const line of String(diff || '').split('\n')) {
    if (line.startsWith('+++') || line.startsWith('---')) continue;
    if (line.startsWith('+')) add++;
    else if (line.startsWith('-')) del++;
  }
  return '+' + add + '/-' + del;
}

// editSummary is one line for an edit's result: op, path, what changed.
function editSummary(e) {
  let s = (e.op || '') + ' ' + (e.path || '');
  if (e.changed) s += ' changed ' + diffStat(e.diff) + (e.diff_truncated ? ' (diff cut)' : '');
  else if (e.op !== 'view') s += ' unchanged';
  return s;
}

// sessionSummary is one line for vera.tool.session.
function sessionSummary(d) {
  return 'session ' + (d.action || '') + ': ' + (d.reason || '') + ((d.lost || []).length ? '; lost: ' + d.lost.join('; ') : '');
}

// answerFileText names an answer submitted as a file, with its digest.
function answerFileText(d) {
  return 'answer file ' + d.answer_file + (d.answer_sha256 ? ' (sha256 ' + String(d.answer_sha256).slice(0, 12) + '…)' : '');
}

function summary(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case 'vera.task.submitted': return short(d.task, 200);
    case 'vera.agent.step':
      if (d.action_tool === 'edit') return 'step ' + d.step + ' ' + short(d.command || ('edit ' + ((d.edit || {}).op || '') + ' ' + ((d.edit || {}).path || '')), 160);
      if (d.answer_file) return 'step ' + d.step + ' submit ' + answerFileText(d);
      return 'step ' + d.step + ' ' + (d.action_tool || '') + ' ' + short(d.command || d.answer || d.notes_text || d.format_error || '', 160);
    case 'vera.tool.requested': return short(d.command, 200);
    case 'vera.tool.finished':
      if (d.edit) return 'exit ' + d.exit_code + ' edit ' + editSummary(d.edit) + (d.exit_code !== 0 ? ' ' + short((d.stderr && d.stderr.head) || d.error || '', 120) : '');
      return 'exit ' + d.exit_code + (d.session === 'exec' ? ' (exec)' : '') + ' ' + short((d.stdout && d.stdout.head) || (d.stderr && d.stderr.head) || d.error || '', 160);
    case 'vera.tool.session': return sessionSummary(d);
    case 'vera.model.requested': return d.scope + '/' + (d.purpose || '') + ' step ' + d.step + ' ' + d.model + ' #' + d.attempt;
    case 'vera.model.responded': return d.scope + ' ' + (d.error ? 'error ' + d.error : (d.finish_reason || '') + ' ' + ((d.usage && d.usage.total) || 0) + ' tok ' + d.latency_ms + 'ms');
    case 'vera.container.log': return d.stream + ' ' + short(d.line, 200);
    case 'vera.notes.appended': return short(d.text, 200);
    case 'vera.evidence.recorded': return d.evidence_id + ' ' + short(d.command, 160);
    case 'vera.fork.prefix': return forkPrefixText(d);
    case 'vera.run.finished': return d.outcome + ' ' + (d.answer_file ? answerFileText(d) + ' ' : '') + short(d.reason || d.answer || '', 160);
    default: {
      const parts = [];
      for (const [k, v] of Object.entries(d)) {
        if (parts.length >= 6) break;
        parts.push(k + '=' + short(typeof v === 'object' ? JSON.stringify(v) : v, 60));
      }
      return parts.join(' ');
    }
  }
}

function addEventRow(run, seq, ev, cls) {
  const body = $('events').tBodies[0];
  const tr = el('tr', { class: 'ev' + (cls ? ' ' + cls : ''), 'data-seq': seq },
    el('td', { class: 'mono' }, seq),
    el('td', { class: 'mono' }, fmtTime(ev.time)),
    el('td', { class: 'mono' }, String(ev.type).replace(/^vera\./, '')),
    el('td', null, ev.source || ''),
    el('td', null, forkButton(run, ev), summary(ev)));
  tr.addEventListener('click', () => {
    const next = tr.nextSibling;
    if (next && next.classList.contains('detail')) { next.remove(); return; }
    tr.after(el('tr', { class: 'detail' }, el('td', null), (() => {
      const diff = ev.type === 'vera.tool.finished' && ev.data && ev.data.edit && ev.data.edit.diff;
      const td = el('td', null, ...(diff ? [el('pre', { class: 'diff' }, diff + (ev.data.edit.diff_truncated ? '\n[diff cut]' : ''))] : []),
        el('pre', null, JSON.stringify(ev, null, 2)));
      td.colSpan = 4;
      return td;
    })()));
  });
  body.append(tr);
  run.eventRows++;
  while (body.rows.length > MAX_EVENT_ROWS) body.deleteRow(0);
  $('event-count').textContent = run.m.events + ' events, last seq ' + seq;
  if ($('autoscroll').checked) {
    const box = $('events').parentElement;
    box.scrollTop = box.scrollHeight;
  }
}

function onEvent(run, ev, seq) {
  run.m.events++;
  addEventRow(run, seq, ev);
  const d = ev.data || {};
  switch (ev.type) {
    case 'vera.task.submitted':
      if (!run.submitted) {
        run.submitted = true;
        lockTask(true, d.task || '');
        $('max-steps').value = d.max_steps ?? '';
        showModelSettings(d.model || {});
        $('template').textContent = settingsText((d.model || {}).name, (d.auditor || {}).enabled,
          (d.verifyfast || {}).enabled, (d.sandbox || {}).network) +
          (d.work_dir ? ' · files in ' + d.work_dir + ' (the sandbox\'s /work is its work/)' : '');
        if (run.state === 'new' || run.state === 'unknown') setRunState(run, 'submitted');
        run.fork = d.fork || null;
        run.evalOf = evalOfLabels(d.labels);
        renderLineage();
      }
      break;
    case 'vera.run.started':
      if (!run.config) run.config = d.config || null;
      if (run.state !== 'finished') setRunState(run, 'running');
      break;
    case 'vera.audit.requested':
      if (d.candidate_step > 0 && (!run.firstAudit || d.candidate_step < run.firstAudit)) {
        run.firstAudit = d.candidate_step;
        for (const b of run.forkButtons) markForkButton(run, b);
      }
      break;
    case 'vera.fork.prefix':
      if (!run.forkPrefix) { run.forkPrefix = d; renderLineage(); }
      break;
    case 'vera.run.cancelled': if (run.state !== 'finished') setRunState(run, 'cancelled'); break;
    case 'vera.run.finished':
      setRunState(run, 'finished');
      $('outcome').textContent = (d.outcome || '') + (d.reason ? ': ' + d.reason : '') +
        (d.answer_file ? ' — ' + answerFileText(d) : '') + (d.answer ? ' — answer: ' + d.answer : '');
      break;
    case 'vera.agent.step': run.m.steps++; break;
    case 'vera.tool.finished': run.m.tools++; if (d.exit_code !== 0) run.m.toolFailures++; break;
    case 'vera.model.requested': modelRequested(run, d); break;
    case 'vera.model.responded': modelResponded(run, d); break;
    case 'vera.container.log':
      appendLog(run, fmtTime(d.time || ev.time) + ' ' + (d.stream || '') + ' ' + (d.line ?? '') + (d.truncated ? ' [truncated]' : ''));
      run.m.containerLines++;
      break;
    case 'vera.tool.session':
      appendLog(run, fmtTime(ev.time) + ' [session] ' + sessionSummary(d) + (d.container ? ' (' + d.container + ')' : ''));
      break;
    case 'vera.container.event':
      appendLog(run, fmtTime(d.time || ev.time) + ' [docker] ' + (d.action || '') + ' ' + (d.container || ''));
      break;
    case 'vera.notes.appended':
      $('notes').append(document.createTextNode((d.text ?? '') + '\n'));
      run.m.notes++;
      break;
    case 'vera.evidence.recorded':
      $('evidence').tBodies[0].append(el('tr', null,
        el('td', { class: 'mono' }, d.evidence_id),
        el('td', null, d.step),
        el('td', { class: 'mono' }, d.command),
        el('td', null, d.exit_code),
        el('td', null, el('pre', null, short(d.excerpt, 2000)), ...(d.urls || []).map((u) => el('div', { class: 'mono hint' }, u)))));
      run.m.evidence++;
      break;
    case 'vera.logic.verdict':
      $('logic').tBodies[0].append(el('tr', null,
        el('td', null, d.step), el('td', null, d.thinking_eval), el('td', null, d.action_eval),
        el('td', null, d.decided_by || d.verifier_type || ''), el('td', null, d.thinking_eval_reason || '')));
      run.m.verdicts++;
      if (d.thinking_eval === 0) run.m.repeats++;
      break;
    case 'vera.audit.judged': auditJudged(run, d); break;
    case 'vera.audit.feedback': auditFeedback(run, d); break;
    case 'vera.verifyfast.scored': {
      const zone = el('td', { class: 'zone-' + d.zone }, d.zone);
      $('verifyfast').tBodies[0].append(el('tr', null,
        el('td', { class: 'mono', title: d.answer_event_id }, short(d.answer_event_id, 12)),
        el('td', { class: 'zone-' + d.zone }, d.credit_score), zone,
        el('td', null, d.high_count), el('td', null, d.low_count), el('td', null, d.profile || '')));
      run.m.vfCredit = d.credit_score; run.m.vfZone = d.zone;
      break;
    }
    default:
      if (String(ev.type).startsWith('vera.policy.')) run.m.policy++;
  }
  scheduleRunMetrics(run);
}

function appendLog(run, line) {
  const pre = $('container-logs');
  pre.append(document.createTextNode(line + '\n'));
  run.logLines++;
  while (run.logLines > MAX_LOG_LINES && pre.firstChild) { pre.removeChild(pre.firstChild); run.logLines--; }
  pre.scrollTop = pre.scrollHeight;
}

// ---- model I/O -------------------------------------------------------------

function blobButton(label, ref) {
  const box = el('div');
  const b = el('button', { type: 'button' }, label + ' (' + ref.size + ' bytes)');
  b.addEventListener('click', async () => {
    b.disabled = true;
    const r = await get('/api/blobs/' + encodeURIComponent(ref.digest));
    const text = await r.text();
    box.append(el('pre', null, r.ok ? text : 'error: ' + text));
  });
  box.append(b);
  return box;
}

function modelRequested(run, d) {
  run.m.modelCalls++;
  const key = d.call_id + '#' + d.attempt;
  const sum = el('summary', null, (d.scope || '') + '/' + (d.purpose || '') + ' · step ' + d.step +
    (d.round ? ' · round ' + d.round : '') + ' · ' + (d.model || '') + ' · attempt ' + d.attempt + ' · ' + d.message_count + ' messages');
  const status = el('span', { class: 'hint' }, ' · waiting…');
  sum.append(status);
  const det = el('details', { class: 'call', 'data-call': key }, sum);
  for (const m of d.messages || []) {
    det.append(el('div', { class: 'role' }, m.role), el('pre', null, m.content));
  }
  if (d.messages_blob) det.append(blobButton('load messages', d.messages_blob));
  const sent = requestSettings(d);
  if (sent) det.append(el('div', { class: 'hint request-settings' }, sent));
  const resp = el('div', { class: 'response' });
  det.append(resp);
  const box = $('modelio');
  box.append(det);
  box.scrollTop = box.scrollHeight;
  run.calls.set(key, { det, status, resp, step: d.step, live: null });
  run.latest.set(d.call_id, key);
  const early = run.pendingLive.get(d.call_id);
  if (early) {
    run.pendingLive.delete(d.call_id);
    for (const p of early) onLive(run, p);
  }
}

// requestSettings describes what a request sent beside its messages:
// tools, response format, sampling and server options.
function requestSettings(d) {
  const parts = [];
  if (d.tools && d.tools.length) parts.push('tools ' + d.tools.join(', ') + (d.tool_choice ? ' (' + d.tool_choice + ')' : ''));
  if (d.response_format) parts.push('response format ' + d.response_format);
  const p = d.params || {};
  if (p.stream) parts.push('streamed');
  for (const [k, v] of [['temperature', p.temperature], ['top_p', p.top_p], ['max_tokens', p.max_tokens], ['seed', p.seed]]) {
    if (v !== undefined && v !== null && !(k === 'max_tokens' && v === 0)) parts.push(k + ' ' + v);
  }
  if (p.stop && p.stop.length) parts.push('stop ' + JSON.stringify(p.stop));
  if (p.extra_body) parts.push('extra_body ' + JSON.stringify(p.extra_body));
  return parts.join(' · ');
}

// ---- live pieces of a reply --------------------------------------------------

const LIVE_KEEP = 20000; // characters of a growing reply in the live box
const LIVE_MAX = 500000; // characters of a growing reply shown in its call

// onLive appends a piece of a reply being generated to its call (and to
// the live box at the top of Model I/O). The pieces are lossy: the reply
// as recorded replaces them when vera.model.responded arrives.
function onLive(run, p) {
  const key = run.latest.get(p.call_id);
  const c = key && run.calls.get(key);
  if (!c) {
    // The piece overtook the stored vera.model.requested: keep it a moment.
    if (p.done) return;
    const q = run.pendingLive.get(p.call_id) || [];
    if (q.length < 200) q.push(p);
    run.pendingLive.set(p.call_id, q);
    return;
  }
  if (c.finished) return;
  if (!c.live) {
    const reasoning = el('pre', { class: 'live-reasoning' });
    const text = el('pre', { class: 'live-text' });
    c.live = { reasoning, text, chars: 0, missed: p.seq !== 1, lastSeq: 0 };
    c.resp.append(el('div', { class: 'role' }, 'generating…'), reasoning, text);
  }
  const lv = c.live;
  if (p.seq !== lv.lastSeq + 1 && lv.lastSeq !== 0) lv.missed = true;
  lv.lastSeq = p.seq;
  const add = (pre, s) => {
    if (!s) return;
    lv.chars += s.length;
    // A huge reply is shown whole once recorded; live, its start only.
    if (lv.chars > LIVE_MAX) {
      if (!lv.capped) { lv.capped = true; lv.text.append(document.createTextNode('\n… (the rest shows when the reply is recorded)')); }
      return;
    }
    pre.append(document.createTextNode(s));
  };
  add(lv.reasoning, p.reasoning);
  add(lv.text, p.content);
  if (p.tool_name) add(lv.text, '\n' + p.tool_name + '(');
  add(lv.text, p.tool_args);
  c.status.textContent = ' · generating ' + lv.chars + ' chars' + (lv.missed ? ' (some pieces missed)' : '') + '…';
  // The live box shows the reply being generated without opening the call.
  run.liveCall = key;
  const box = $('live-reply');
  $('live-reply-box').hidden = false;
  $('live-reply-title').textContent = 'step ' + (p.step ?? c.step) + ' · generating';
  clear(box);
  const shown = (lv.reasoning.textContent ? '[reasoning] ' + tailOf(lv.reasoning.textContent, 2000) + '\n\n' : '') + tailOf(lv.text.textContent, LIVE_KEEP);
  box.append(document.createTextNode(shown));
  box.scrollTop = box.scrollHeight;
}

function tailOf(s, n) { return s.length > n ? '…' + s.slice(s.length - n) : s; }

// endLive removes a call's live pieces once its reply is recorded.
function endLive(run, key, c) {
  c.finished = true;
  if (c.live) {
    for (const n of [c.live.reasoning.previousSibling, c.live.reasoning, c.live.text]) if (n) n.remove();
    c.live = null;
  }
  if (run.liveCall === key) {
    run.liveCall = null;
    clear($('live-reply'));
    $('live-reply-box').hidden = true;
  }
}

function modelResponded(run, d) {
  const key = d.call_id + '#' + d.attempt;
  let c = run.calls.get(key);
  if (!c) {
    modelRequested(run, { call_id: d.call_id, attempt: d.attempt, scope: d.scope, step: d.step, model: d.model, message_count: '?' });
    run.m.modelCalls--;
    c = run.calls.get(key);
  }
  endLive(run, key, c);
  const u = d.usage || {};
  c.status.textContent = d.error
    ? ' · error'
    : ' · ' + (d.finish_reason || 'done') + ' · ' + (u.total || 0) + ' tok · ' + d.latency_ms + ' ms';
  if (d.error) { c.status.className = 'err'; run.m.modelErrors++; }
  c.resp.append(el('div', { class: 'role' }, 'response' + (d.http_status ? ' (HTTP ' + d.http_status + ')' : '')));
  if (d.error) c.resp.append(el('pre', { class: 'err' }, d.error));
  if (d.reasoning || d.reasoning_blob) {
    // The model's reasoning, collapsed: often long, but worth auditing.
    const src = d.reasoning_source ? ' (' + d.reasoning_source + ')' : '';
    const size = d.reasoning ? d.reasoning.split('\n').length + ' lines' : d.reasoning_blob.size + ' bytes';
    const rd = el('details', { class: 'reasoning' }, el('summary', null, 'reasoning' + src + ' · ' + size));
    if (d.reasoning) rd.append(el('pre', null, d.reasoning));
    if (d.reasoning_blob) rd.append(blobButton('load reasoning', d.reasoning_blob));
    c.resp.append(rd);
  }
  if (d.text !== undefined && d.text !== '') c.resp.append(el('pre', { class: 'reply-text' }, d.text));
  if (d.text_blob) c.resp.append(blobButton('load response', d.text_blob));
  for (const tc of d.tool_calls || []) {
    c.resp.append(el('div', { class: 'role' }, 'tool call' + (tc.id ? ' ' + tc.id : '')),
      el('pre', { class: 'tool-call' }, (tc.name || '?') + ' ' + (tc.arguments_blob ? '(' + tc.arguments_blob.size + ' bytes of arguments)' : prettyArgs(tc.arguments))));
    if (tc.arguments_blob) c.resp.append(blobButton('load arguments', tc.arguments_blob));
  }
  if (d.dropped && d.dropped.length) {
    c.resp.append(el('div', { class: 'hint' }, 'the server refused ' + d.dropped.join(', ') + '; sent again without'));
  }
  const scope = d.scope || 'unknown';
  run.m.tokens[scope] = (run.m.tokens[scope] || 0) + (u.total || 0);
}

// prettyArgs indents a tool call's JSON arguments, or shows them as sent.
function prettyArgs(a) {
  try { return JSON.stringify(JSON.parse(a), null, 2); } catch (_) { return String(a ?? ''); }
}

// ---- auditor ---------------------------------------------------------------

function scoreClass(s) { return s >= 4 ? 'score-good' : s === 3 ? 'score-mid' : 'score-bad'; }

function auditRow(run, round) {
  let a = run.audits.get(round);
  if (!a) {
    const tr = el('tr', null, el('td', null, round), el('td'), el('td'), el('td'), el('td'));
    $('audit').tBodies[0].append(tr);
    a = { tr };
    run.audits.set(round, a);
  }
  return a;
}

function auditJudged(run, d) {
  const a = auditRow(run, d.round);
  const [, score, raw, instr] = a.tr.cells;
  score.textContent = d.score;
  score.className = scoreClass(d.score);
  raw.textContent = d.raw_score;
  clear(instr);
  const ol = el('ol');
  for (const i of d.instructions || []) ol.append(el('li', null, i));
  instr.append(ol);
  for (const c of d.caps || []) instr.append(el('div', { class: 'hint' }, 'cap ' + c.cap + ' (' + c.rule + '): ' + c.reason));
  run.m.auditRounds++;
  run.m.lastScore = d.score;
  run.m.bestScore = d.best_score;
}

function auditFeedback(run, d) {
  const a = auditRow(run, d.round);
  const fb = a.tr.cells[4];
  clear(fb);
  fb.append(el('div', null, (d.accepted ? 'accepted' : 'not accepted') + (d.final ? ', final' : '')));
  if (d.message) fb.append(el('pre', null, short(d.message, 2000)));
}

// ---- metrics ---------------------------------------------------------------

let metricsTimer = null;
function scheduleRunMetrics(run) {
  if (metricsTimer) return;
  metricsTimer = setTimeout(() => { metricsTimer = null; if (cur === run) renderRunMetrics(run); }, 200);
}

function renderRunMetrics(run) {
  const m = run.m;
  const rows = [
    ['events', m.events + (m.malformed ? ' (' + m.malformed + ' malformed)' : '')],
    ['agent steps', m.steps],
    ['model calls', m.modelCalls + (m.modelErrors ? ' (' + m.modelErrors + ' errors)' : '')],
    ['model tokens', Object.entries(m.tokens).map(([k, v]) => k + ' ' + v).join(', ') || '0'],
    ['tool calls', m.tools + (m.toolFailures ? ' (' + m.toolFailures + ' non-zero exit)' : '')],
    ['evidence', m.evidence],
    ['notes appends', m.notes],
    ['policy nudges', m.policy],
    ['logic verdicts', m.verdicts + ' (' + m.repeats + ' unaware repeats)'],
    ['audit rounds', m.auditRounds + (m.lastScore !== null ? ' · last score ' + m.lastScore + ' · best ' + m.bestScore : '')],
    ['VerifyFast', m.vfCredit !== null ? 'credit ' + m.vfCredit + ' · ' + m.vfZone : '–'],
    ['container log lines', m.containerLines],
  ];
  const body = $('run-metrics').tBodies[0];
  clear(body);
  for (const [k, v] of rows) body.append(el('tr', null, el('th', null, k), el('td', null, v)));
}

let metricsEnabled = false;
async function loadGlobalMetrics() {
  if (!metricsEnabled) return;
  try {
    const r = await get('/api/metrics');
    if (!r.ok) return;
    const j = await r.json();
    const body = $('global-metrics').tBodies[0];
    clear(body);
    for (const f of j.metrics || []) {
      if (!f.name.startsWith('dra_')) continue;
      for (const s of f.samples || []) {
        const labels = s.labels ? '{' + Object.entries(s.labels).map(([k, v]) => k + '="' + v + '"').join(',') + '}' : '';
        const val = s.count !== undefined && (f.type === 'HISTOGRAM' || f.type === 'SUMMARY')
          ? 'sum ' + s.value + ' / count ' + s.count : s.value;
        body.append(el('tr', { title: f.help }, el('td', { class: 'mono' }, f.name + labels), el('td', null, val)));
      }
    }
  } catch (_) { /* try again later */ }
}

// ---- model settings of a run started here --------------------------------------

const MODEL_FIELDS = ['tool-protocol', 'temperature', 'top-p', 'max-tokens', 'seed', 'stream'];

// modelSettingsFromForm is the model member of the start request: only
// the fields filled in (the others keep the template's settings).
function modelSettingsFromForm() {
  const m = {};
  const v = (id) => $(id).value.trim();
  if (v('tool-protocol')) m.tool_protocol = v('tool-protocol');
  if (v('temperature') !== '') m.temperature = parseFloat(v('temperature'));
  if (v('top-p') !== '') m.top_p = parseFloat(v('top-p'));
  if (v('max-tokens') !== '') m.max_tokens = parseInt(v('max-tokens'), 10);
  if (v('seed') !== '') m.seed = parseInt(v('seed'), 10);
  if (v('stream') === 'on') m.stream = true;
  if (v('stream') === 'off') m.stream = false;
  return m;
}

// showModelSettings fills the fields from a submitted run's model.
function showModelSettings(m) {
  $('tool-protocol').value = m.tool_protocol || '';
  $('temperature').value = m.temperature ?? '';
  $('top-p').value = m.top_p ?? '';
  $('max-tokens').value = m.max_tokens || '';
  $('seed').value = m.seed ?? '';
  $('stream').value = m.stream === undefined ? '' : (m.stream ? 'on' : 'off');
}

// templateSettings shows the template's settings as the fields' placeholders.
function templateSettings(ms) {
  ms = ms || {};
  $('temperature').placeholder = ms.temperature ?? 'server';
  $('top-p').placeholder = ms.top_p ?? 'server';
  $('max-tokens').placeholder = ms.max_tokens ?? 'server';
  $('seed').placeholder = ms.seed ?? 'none';
  $('tool-protocol').options[0].textContent = 'default (' + (ms.tool_protocol || 'auto') + ')';
  $('stream').options[0].textContent = 'default (' + (ms.stream === false ? 'off' : 'on') + ')';
}

// ---- forks -------------------------------------------------------------------

// forkButton is the "Fork here" control of an agent step's row (null for
// other rows): it opens the fork form at that step.
function forkButton(run, ev) {
  if (ev.type !== 'vera.agent.step' || !ev.data || !(ev.data.step > 0)) return null;
  const b = el('button', { type: 'button', class: 'fork-here', 'data-step': String(ev.data.step) }, 'Fork here');
  b.addEventListener('click', (e) => {
    e.stopPropagation();
    if (!b.disabled) openForkForm(run, ev.data.step);
  });
  run.forkButtons.push(b);
  markForkButton(run, b);
  return b;
}

// markForkButton disables the control of a step at or after the run's
// first audited answer: a fork must branch before it.
function markForkButton(run, b) {
  const step = parseInt(b.getAttribute('data-step'), 10);
  b.disabled = run.firstAudit > 0 && step >= run.firstAudit;
  b.title = b.disabled
    ? 'a fork must branch before the first audited answer (step ' + run.firstAudit + ')'
    : 'start a new run that reproduces steps 1-' + step + ' from the recording, then goes on live';
}

function openForkForm(run, step) {
  if (cur !== run) return;
  const c = run.config || {};
  $('fork-at-step').value = step;
  $('fork-model').value = '';
  $('fork-model').placeholder = ((c.model || {}).name) || 'as the run';
  $('fork-tool-protocol').value = '';
  $('fork-tool-protocol').options[0].textContent = 'as the run (' + (((c.model || {}).tool_protocol) || 'auto') + ')';
  $('fork-auditor').value = '';
  $('fork-auditor').options[0].textContent = 'as the run (' + (((c.auditor || {}).enabled) ? 'on' : 'off') + ')';
  $('fork-audit-rounds').value = '';
  $('fork-audit-rounds').placeholder = String(((c.auditor || {}).max_rounds) ?? '');
  $('fork-note').value = '';
  $('fork-msg').textContent = '';
  $('fork-msg').className = 'msg';
  $('fork-submit').disabled = false;
  $('fork-form').hidden = false;
  $('fork-form').scrollIntoView({ block: 'nearest' });
}

$('fork-close').addEventListener('click', () => { $('fork-form').hidden = true; });

$('fork-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  if (!cur) return;
  const run = cur;
  const v = (id) => $(id).value.trim();
  const body = { at_step: parseInt(v('fork-at-step'), 10) };
  if (v('fork-model')) body.model = v('fork-model');
  if (v('fork-tool-protocol')) body.tool_protocol = v('fork-tool-protocol');
  if (v('fork-auditor')) body.auditor = v('fork-auditor') === 'on';
  if (v('fork-audit-rounds') !== '') body.audit_rounds = parseInt(v('fork-audit-rounds'), 10);
  if (v('fork-note')) body.note = v('fork-note');
  $('fork-submit').disabled = true;
  const r = await api('POST', '/api/runs/' + encodeURIComponent(run.id) + '/fork', body);
  if (r.status === 201) {
    await loadSessions();
    selectRun(r.json.run_id);
    return;
  }
  $('fork-submit').disabled = false;
  const m = $('fork-msg');
  m.textContent = r.status === 401 ? 'Enter the token printed by vera at start (top right).' : (r.json.error || ('HTTP ' + r.status));
  m.className = 'msg error';
});

function forkPrefixText(d) {
  if (d.reproduced) return 'prefix reproduced: ' + d.steps_compared + ' steps, ' + d.commands_compared + ' commands compared';
  const v = d.divergence || {};
  return 'prefix diverged at step ' + (v.step ?? '?') + ' (' + (v.kind || '?') + '): ' + short(v.detail || '', 300) +
    (v.recorded || v.replayed ? ' — recorded: ' + short(v.recorded || '', 200) + ' · replayed: ' + short(v.replayed || '', 200) : '');
}

// runLink is a link that opens run id in this page.
function runLink(id) {
  const a = el('a', { class: 'mono run-link', 'data-run': id }, id);
  a.href = '#run=' + encodeURIComponent(id);
  a.addEventListener('click', (e) => { e.preventDefault(); selectRun(id); });
  return a;
}

// renderLineage shows where the selected run forks from (its task's
// fork), its prefix's status (vera.fork.prefix), and the runs that fork
// it (the session list's forks).
function renderLineage() {
  const box = $('lineage');
  const from = $('forked-from'), prefix = $('fork-prefix'), forks = $('forks'), evalOf = $('eval-of');
  clear(from); clear(prefix); clear(forks); clear(evalOf);
  if (!cur) { box.hidden = true; return; }
  const run = cur;
  if (run.evalOf) {
    const e = run.evalOf;
    evalOf.append('part of eval ', evalLink(e.id), [e.task ? ' · task ' + e.task : '', e.profile ? ' · profile ' + e.profile : '',
      e.attempt ? ' · attempt ' + e.attempt : ''].join(''), run.fork ? ' · ' : '');
  }
  if (run.fork) {
    from.append('forked from ', runLink(run.fork.from), ' at step ' + run.fork.at_step + (run.fork.note ? ' (' + run.fork.note + ')' : ''));
    if (run.forkPrefix) {
      prefix.className = run.forkPrefix.reproduced ? 'reproduced' : 'diverged';
      prefix.append('· ' + forkPrefixText(run.forkPrefix));
    } else {
      prefix.className = 'hint';
      prefix.append('· prefix not reproduced yet');
    }
  }
  const s = sessions.find((x) => x.run_id === run.id);
  const list = (s && s.forks) || [];
  if (list.length > 0) {
    forks.append(run.fork ? ' · forks: ' : 'forks: ');
    list.forEach((id, i) => {
      if (i > 0) forks.append(', ');
      forks.append(runLink(id));
    });
  }
  box.hidden = !run.fork && list.length === 0 && !run.evalOf;
}

// ---- evals -----------------------------------------------------------------
//
// An eval (vera eval) is not a run: its events (vera.eval.*) are stored
// under its id, and each task × profile is a run labelled eval_id,
// eval_task, eval_profile, eval_attempt. The server computes its figures
// (GET /api/evals/{id}, the eval.Report); the page reads them again when
// the eval's feed brings a new event.

let evals = [];
let evalsTimer = null;
let curEval = null;

async function loadEvals() {
  try {
    const r = await get('/api/evals');
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || r.statusText);
    evals = j.evals || [];
    renderEvals();
  } catch (e) {
    setConn(false, 'evals: ' + e.message);
  }
}

function scheduleEvals() {
  if (evalsTimer) return;
  evalsTimer = setTimeout(() => { evalsTimer = null; loadEvals(); }, 150);
}

function pct(x) { return (100 * (Number(x) || 0)).toFixed(1) + '%'; }

function fmtDuration(ms) {
  const s = Math.round((Number(ms) || 0) / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  return Math.floor(s / 3600) + 'h' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + 'm';
}


function renderEvals() {
  const ul = $('evals');
  clear(ul);
  $('no-evals').hidden = evals.length > 0;
  for (const v of evals) {
    const li = el('li', { 'data-eval': v.eval_id, title: v.eval_id },
      el('span', { class: 'title' }, v.name || v.eval_id),
      el('span', { class: 'meta' }, [v.started_at ? new Date(v.started_at).toLocaleString() : '',
        v.tasks + ' tasks × ' + (v.profiles || []).length + ' profiles',
        v.scored + '/' + v.expected + ' scored' + (v.infra ? ' (' + v.infra + ' infra)' : ''),
        v.state + (v.resumes ? ' · resumed ' + v.resumes + '×' : '')].filter(Boolean).join(' · ')),
      el('span', { class: 'meta mono' }, v.eval_id));
    if (curEval && curEval.id === v.eval_id) li.classList.add('selected');
    li.addEventListener('click', () => selectEval(v.eval_id));
    ul.append(li);
  }
}

// evalOfLabels reads the labels vera eval puts on its runs' tasks.
function evalOfLabels(labels) {
  const l = labels || {};
  if (typeof l.eval_id !== 'string' || l.eval_id === '') return null;
  return { id: l.eval_id, task: l.eval_task || '', profile: l.eval_profile || '', attempt: l.eval_attempt || '' };
}

// evalLink is a link that opens eval id in this page.
function evalLink(id) {
  const a = el('a', { class: 'mono eval-link', 'data-eval': id }, id);
  a.href = '#eval=' + encodeURIComponent(id);
  a.addEventListener('click', (e) => { e.preventDefault(); selectEval(id); });
  return a;
}

// showView shows the eval page or the run's panels.
function showView(which) {
  const isEval = which === 'eval';
  $('eval-panel').hidden = !isEval;
  $('run-panel').hidden = isEval;
  $('grid').hidden = isEval;
}

function closeEval() {
  if (!curEval) return;
  if (curEval.es) curEval.es.close();
  if (curEval.timer) clearTimeout(curEval.timer);
  curEval = null;
}

function selectEval(id) {
  if (cur && cur.es) cur.es.close();
  cur = null;
  closeEval();
  hashParams.delete('run');
  hashParams.set('eval', id);
  saveHash();
  showView('eval');
  const ev = { id, es: null, timer: null, loading: false, again: false, seen: null };
  curEval = ev;
  for (const t of ['eval-accuracy', 'eval-auditor', 'eval-tasks']) clear($(t).tBodies[0]);
  clear($('eval-accuracy').tHead);
  $('eval-id').textContent = id;
  $('eval-name').textContent = '';
  $('eval-state').textContent = 'loading…';
  $('eval-progress').textContent = '';
  $('eval-meta').textContent = '';
  $('eval-error').textContent = '';
  renderEvals();
  renderSessions();
  loadEval(ev);
}

async function loadEval(ev) {
  if (ev.loading) { ev.again = true; return; }
  ev.loading = true;
  let after = 0;
  try {
    const r = await get('/api/evals/' + encodeURIComponent(ev.id));
    const j = await r.json();
    if (curEval !== ev) return;
    if (!r.ok) {
      $('eval-error').textContent = j.error || ('HTTP ' + r.status);
      $('eval-state').textContent = r.status === 404 ? 'not started' : 'error';
    } else {
      $('eval-error').textContent = '';
      renderEval(ev, j);
      after = j.last_seq || 0;
    }
    if (!ev.es) watchEval(ev, after);
  } catch (e) {
    if (curEval === ev) $('eval-error').textContent = 'eval: ' + e.message;
  } finally {
    ev.loading = false;
    if (ev.again && curEval === ev) { ev.again = false; loadEval(ev); }
  }
}

// watchEval follows the eval's own events from the point its report was
// read, and reads the report again (at most every 150 ms) when one comes.
function watchEval(ev, after) {
  const es = feed('/api/runs/' + encodeURIComponent(ev.id) + '/events?types=' + encodeURIComponent('vera.eval.*') + '&after=' + after);
  ev.es = es;
  es.onmessage = () => {
    if (curEval !== ev || ev.timer) return;
    ev.timer = setTimeout(() => { ev.timer = null; if (curEval === ev) loadEval(ev); }, 150);
  };
  es.onopen = () => setConn(true, 'live');
  es.onerror = () => setConn(false, 'reconnecting…');
}

function renderEval(ev, d) {
  const profiles = d.profiles || [];
  const results = d.results || [];
  $('eval-name').textContent = d.name || '';
  $('eval-state').textContent = d.state + (d.resumes ? ' · resumed ' + d.resumes + '×' : '');
  $('eval-state').title = d.state === 'running' ? 'no vera.eval.finished since it started: running, or its process died (vera eval --resume goes on)' : '';
  $('eval-progress').textContent = 'scored ' + d.scored + '/' + d.expected + ' · infra ' + d.infra +
    (d.finished ? ' · ' + (d.finished.interrupted ? 'interrupted' : 'finished') + ' after ' + fmtDuration(d.finished.duration_ms) : '');
  $('eval-meta').textContent = [d.tasks + ' tasks × ' + profiles.length + ' profiles (' + profiles.map((p) => p.name).join(', ') + ')',
    d.started ? 'started ' + new Date(d.started).toLocaleString() : '', d.task_set ? 'task set ' + d.task_set : ''].filter(Boolean).join(' · ');

  // Accuracy by round: first, r1..rN, final.
  const rounds = Math.max(0, ...profiles.map((p) => (p.by_round || []).length));
  const head = $('eval-accuracy').tHead;
  clear(head);
  const hr = el('tr', null, el('th', null, 'profile'), el('th', null, 'scored'), el('th', null, 'infra'), el('th', null, 'first'));
  for (let r = 1; r <= rounds; r++) hr.append(el('th', null, 'r' + r));
  hr.append(el('th', null, 'final'), el('th', null, 'steps'), el('th', null, 'tokens'), el('th', null, 'wall'));
  head.append(hr);
  const acc = $('eval-accuracy').tBodies[0];
  clear(acc);
  for (const p of profiles) {
    const tr = el('tr', { 'data-profile': p.name }, el('td', null, p.name), el('td', null, p.scored), el('td', null, p.infra),
      el('td', null, pct(p.first_accuracy)));
    for (let r = 1; r <= rounds; r++) {
      const v = (p.by_round || [])[r - 1];
      tr.append(el('td', null, v === undefined ? '—' : pct(v)));
    }
    tr.append(el('td', null, pct(p.final_accuracy)), el('td', null, (p.mean_steps || 0).toFixed(1)),
      el('td', null, Math.round(p.mean_tokens || 0)), el('td', null, fmtDuration(p.mean_wall_ms)));
    acc.append(tr);
  }

  // The auditor's own quality.
  const aud = $('eval-auditor').tBodies[0];
  clear(aud);
  for (const p of profiles) {
    const st = p.auditor_stats;
    if (!st) continue;
    aud.append(el('tr', { 'data-profile': p.name }, el('td', null, p.name), el('td', null, st.judged),
      el('td', null, st.accepted_right), el('td', null, st.accepted_wrong), el('td', null, st.rejected_right), el('td', null, st.rejected_wrong),
      el('td', null, pct(st.precision)), el('td', null, pct(st.recall))));
  }
  if (!aud.rows.length) aud.append(el('tr', null, el('td', { class: 'hint' }, 'no profile with the auditor')));

  // Per task: the latest attempt of each task × profile.
  const body = $('eval-tasks').tBodies[0];
  clear(body);
  const seen = new Set();
  for (const x of results) {
    const key = JSON.stringify([x.task_id, x.profile]) + '#' + x.attempt;
    seen.add(key);
    const marks = el('td', null);
    for (const rd of (x.rounds || [])) {
      marks.append(el('span', { class: rd.correct ? 'mark-right' : 'mark-wrong', title: 'round ' + rd.round + (rd.audited ? ', audit score ' + rd.audit_score : '') + ': ' + short(rd.answer, 300) },
        'r' + rd.round + (rd.correct ? ' ✓' : ' ✗') + (rd.accepted ? ' (accepted)' : '')), ' ');
    }
    marks.append(el('span', { class: x.correct ? 'mark-right' : 'mark-wrong', title: 'final answer: ' + short(x.final_answer, 300) }, 'final ' + (x.correct ? '✓' : '✗')));
    const tr = el('tr', { class: (x.infra ? 'infra' : '') + (ev.seen && !ev.seen.has(key) ? ' new' : ''),
      'data-task': x.task_id, 'data-profile': x.profile, 'data-run': x.run_id },
    el('td', { class: 'mono' }, x.task_id),
    el('td', null, x.profile),
    el('td', null, x.attempt),
    el('td', { title: x.reason || '' }, (x.outcome || 'did not end') + (x.infra ? ' · infra' : '') + (x.reason ? ' · ' + short(x.reason, 80) : '')),
    el('td', null, (x.rounds || []).length),
    marks,
    el('td', null, x.steps),
    el('td', null, runLink(x.run_id)));
    body.append(tr);
  }
  ev.seen = seen;
}

// ---- start -----------------------------------------------------------------

async function init() {
  try {
    const r = await get('/api/config');
    if (r.status === 401) { $('token').placeholder = 'token (see dashboard.token in the data dir)'; setConn(false, 'token needed'); }
    const c = await r.json();
    metricsEnabled = !!c.metrics;
    $('global-metrics-box').hidden = !metricsEnabled;
    templateText = settingsText(c.model, c.auditor, c.verifyfast, c.network);
    $('template').textContent = templateText;
    $('max-steps').placeholder = String(c.max_steps ?? 0);
    templateSettings(c.model_settings);
    if (!token) $('token').placeholder = 'token (see ' + c.token_file + ')';
  } catch (_) { /* the panels still work */ }
  await loadSessions();
  await loadEvals();
  const wantEval = hashParams.get('eval');
  const want = hashParams.get('run');
  if (wantEval) selectEval(wantEval);
  else if (want) selectRun(want);
  loadGlobalMetrics();
  setInterval(loadGlobalMetrics, 3000);
}

init();
