// rein's inbox page (rein/web/inbox_page.py serves it; docs/inbox.md). Served as a file of its own: the page's
// Content-Security-Policy allows no inline script. Sign-in: a link `.../inbox#token=...` (the fragment never
// reaches a server) puts the token in this tab's sessionStorage and leaves the address bar; every call sends it as
// `Authorization: Bearer` (no cookies anywhere).
const $ = s => document.querySelector(s);
function fromLink() {
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given) sessionStorage.setItem('rein-token', given);
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
}
fromLink();
let token = sessionStorage.getItem('rein-token') || '';
let me = null, items = [], picked = new Set(), open = new Set();
const esc = t => String(t ?? '').replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const headers = () => token ? {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'} : {'Content-Type': 'application/json'};
function say(text, good) { const s = $('#status'); s.textContent = text; s.className = good ? 'good' : 'bad'; }
async function api(path, opts = {}) {
  const r = await fetch(path, {...opts, headers: headers()});
  if (r.status === 401) { $('#signin').style.display = 'block'; throw new Error('sign in first'); }
  const body = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function ago(iso) { if (!iso) return ''; const s = Math.max(0, (Date.now() - new Date(iso)) / 1000);
  return s < 60 ? Math.round(s) + 's' : s < 3600 ? Math.round(s / 60) + 'm' : s < 86400 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd'; }
function card(it) {
  const d = document.createElement('div'); d.className = 'item'; d.dataset.run = it.run_id; d.dataset.sig = JSON.stringify(it);
  const link = it.ui ? `<a href="${esc(it.ui)}" target="_blank">${esc(it.run_id)}</a>` : esc(it.run_id);
  const tool = it.calls.length ? it.calls[0].tool : '';
  let acts = '';
  if (it.kind === 'approval') acts = `<button class="approve">Approve</button><button class="deny">Deny</button>
    <button class="remember">Approve and remember</button><select class="scope"><option value="always">for ${esc(tool)} of ${esc(it.agent)}</option>
    <option value="${it.thread ? 'thread' : 'run'}">in this ${it.thread ? 'thread' : 'run'} only</option></select>`;
  else if (it.kind === 'question') acts = `<input class="answer-text" size="40" placeholder="your answer"><button class="answer approve">Answer</button>`;
  else acts = `<button class="retry approve">Retry</button>`;
  d.innerHTML = `<div class="top">${it.kind === 'approval' ? '<input type="checkbox" class="pick">' : ''}
    <span class="kind ${it.kind}">${it.kind}</span><b>${esc(it.agent)}</b>${it.tenant ? '<span class="meta">tenant ' + esc(it.tenant) + '</span>' : ''}
    <span class="meta">${it.thread ? 'thread' : 'run'} ${link}</span></div>
    <div class="call">${esc(it.call_line || '(no details: a run of an earlier build)')}</div>
    ${it.said ? '<div class="said">“' + esc(it.said) + '”</div>' : ''}
    <div class="meta">waiting ${ago(it.since)}${it.until ? ' · times out ' + new Date(it.until).toLocaleString() : ''}</div>
    <div class="actions">${acts}<button class="show-turns">Conversation</button></div><div class="turns" hidden></div>`;
  const pick = d.querySelector('.pick');
  if (pick) { pick.checked = picked.has(it.run_id); pick.onchange = () => pick.checked ? picked.add(it.run_id) : picked.delete(it.run_id); }
  const act = (action, extra = {}) => decide({run_id: it.run_id, action, reason: $('#reason').value, ...extra});
  d.querySelector('.approve:not(.answer):not(.retry)')?.addEventListener('click', () => act('approve'));
  d.querySelector('.deny')?.addEventListener('click', () => act('deny'));
  d.querySelector('.remember')?.addEventListener('click', () => act('approve', {remember: d.querySelector('.scope').value, tool,
    tool_call_id: it.calls.length === 1 ? it.calls[0].id : null}));
  d.querySelector('.answer')?.addEventListener('click', () => act('answer', {text: d.querySelector('.answer-text').value}));
  d.querySelector('.retry')?.addEventListener('click', () => act('retry'));
  d.querySelector('.show-turns').addEventListener('click', () => toggleTurns(d, it.run_id));
  if (open.has(it.run_id)) toggleTurns(d, it.run_id, true);
  return d;
}
async function toggleTurns(d, run, keep) {
  const t = d.querySelector('.turns');
  if (!keep && !t.hidden) { t.hidden = true; open.delete(run); return; }
  open.add(run); t.hidden = false; t.textContent = 'loading…';
  try { const turns = await api('/inbox/api/runs/' + encodeURIComponent(run) + '/turns');
    t.innerHTML = turns.map(m => `<div><b>${esc(m.role)}</b>: ${esc(m.text)}${m.calls ? ' <code>' + esc(m.calls) + '</code>' : ''}</div>`).join('');
  } catch (e) { t.textContent = e.message; }
}
function render(list) {
  items = list; const box = $('#items'); const ids = new Set(list.map(i => i.run_id));
  for (const id of [...picked]) if (!ids.has(id)) picked.delete(id);
  $('#count').textContent = list.length + ' waiting';
  if (!list.length) { box.innerHTML = '<div class="empty">nothing waits for you</div>'; return; }
  box.querySelector('.empty')?.remove();
  const have = new Map([...box.querySelectorAll('.item')].map(e => [e.dataset.run, e]));
  let prev = null;
  for (const it of list) {
    let el = have.get(it.run_id);
    if (!el || el.dataset.sig !== JSON.stringify(it)) { const fresh = card(it); el ? el.replaceWith(fresh) : null; el = fresh; }
    have.delete(it.run_id);
    if (prev ? prev.nextSibling !== el : box.firstChild !== el) prev ? prev.after(el) : box.prepend(el);
    prev = el;
  }
  for (const el of have.values()) el.remove();
}
function report(outcomes) {
  const bad = outcomes.filter(o => o.outcome !== 'applied');
  if (bad.length) say(bad.map(o => `${o.outcome} ${o.run_id}: ${o.detail}`).join('\n'), false);
  else say(outcomes.map(o => `applied ${o.run_id} ${o.decided.join(', ')}`).join('\n'), true);
}
async function decide(body) {
  try { const r = await api('/inbox/api/decide', {method: 'POST', body: JSON.stringify(body)});
    report([r, ...(r.also || [])]); if (r.rule) { say(`applied ${r.run_id}; rule ${r.rule.id} added`, true); loadRules(); }
  } catch (e) { say(e.message, false); }
}
async function bulk(action) {
  if (!picked.size) return say('select some approvals first', false);
  try { report(await api('/inbox/api/bulk', {method: 'POST', body: JSON.stringify({run_ids: [...picked], action, reason: $('#reason').value})})); picked.clear(); }
  catch (e) { say(e.message, false); }
}
async function loadRules() {
  try { const rules = await api('/inbox/api/rules');
    $('#rules').innerHTML = rules.map(r => `<li data-rule="${esc(r.id)}"><b>${esc(r.id)}</b> ${esc(r.line)} <span class="meta">${esc(r.scope)} · ${esc(r.by)}</span>
      <button class="remove">remove</button></li>`).join('') || '<li class="meta">no rules</li>';
    for (const li of $('#rules').querySelectorAll('li[data-rule]')) li.querySelector('.remove').onclick = async () => {
      try { await api('/inbox/api/rules/' + encodeURIComponent(li.dataset.rule), {method: 'DELETE'}); loadRules(); say('rule removed', true); } catch (e) { say(e.message, false); } };
  } catch (e) { say(e.message, false); }
}
async function follow() {
  while (true) {
    try {
      const r = await fetch('/inbox/api/events', {headers: headers()});
      if (r.status === 401 || r.status === 403) { $('#signin').style.display = 'block'; say((await r.json()).error, false); return; }
      if (!r.ok) throw new Error(r.statusText);
      const reader = r.body.getReader(), dec = new TextDecoder(); let buf = '';
      while (true) { const {value, done} = await reader.read(); if (done) break; buf += dec.decode(value, {stream: true});
        let cut; while ((cut = buf.indexOf('\n\n')) >= 0) { const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
          const data = block.split('\n').filter(l => l.startsWith('data: ')).map(l => l.slice(6)).join('\n');
          if (block.startsWith('event: items') && data) render(JSON.parse(data));
          if (block.startsWith('event: expired')) say(JSON.parse(data).error, false); } }
    } catch (e) { /* the server restarted: follow again */ }
    await new Promise(ok => setTimeout(ok, 1000));
  }
}
async function start() {
  try { me = await api('/inbox/api/me'); } catch (e) { say(e.message, false); return; }
  $('#signin').style.display = 'none';
  $('#who').textContent = `${me.subject}${me.tenant ? ' · tenant ' + me.tenant : ' · every tenant'}`;
  loadRules(); follow();
}
$('#signin-form').onsubmit = e => { e.preventDefault(); token = $('#token').value.trim(); sessionStorage.setItem('rein-token', token); start(); };
$('#select-all').onchange = e => { for (const it of items) if (it.kind === 'approval') e.target.checked ? picked.add(it.run_id) : picked.delete(it.run_id);
  for (const p of document.querySelectorAll('.pick')) p.checked = e.target.checked; };
$('#bulk-approve').onclick = () => bulk('approve'); $('#bulk-deny').onclick = () => bulk('deny');
$('#rule-form').onsubmit = async e => { e.preventDefault();
  try { const r = await api('/inbox/api/rules', {method: 'POST', body: JSON.stringify({effect: $('#rule-effect').value, tool: $('#rule-tool').value,
      agent: $('#rule-agent').value, args: $('#rule-args').value})});
    say(`rule ${r.rule.id} added` + (r.decided.length ? `; it decided ${r.decided.length} pending call(s)` : ''), true); loadRules();
  } catch (e) { say(e.message, false); } };
start();
