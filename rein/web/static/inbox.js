// rein's inbox page (rein/web/inbox_page.py serves it; docs/inbox.md). Served as a file of its own: the page's
// Content-Security-Policy allows no inline script. Sign-in: a link `.../inbox#token=...` (the fragment never
// reaches a server) puts the token in this tab's sessionStorage and leaves the address bar; every call sends it as
// `Authorization: Bearer` (no cookies anywhere). Every decision names what its card shows: the wait and the call ids
// (docs/inbox.md); a refusal because the card went stale brings the run as it waits now, which the card then shows.
const $ = s => document.querySelector(s);
function fromLink() {
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given) sessionStorage.setItem('rein-token', given);
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
}
fromLink();
let token = sessionStorage.getItem('rein-token') || '';
let me = null, items = [], listed = [];
// What the person selected, each with the wait its card showed then (a card whose wait changes is unselected);
// runs whose card a refusal refreshed (the stale wait, the run as it waits now) until the list itself moves past
// that wait; a one-line notice on such a card.
const picked = new Map(), fresh = new Map(), notices = new Map(), open = new Set();
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
const noticeOf = it => notices.get(it.run_id)?.wait === it.wait ? notices.get(it.run_id).text : '';
const sigOf = it => JSON.stringify(it) + noticeOf(it);
// What a card decides: the wait it shows and exactly the calls it lists (never the ones `more` leaves out).
const shown = it => ({run_id: it.run_id, wait: it.wait, tool_call_ids: it.calls.map(c => c.id)});
function calls(it) {
  if (it.kind !== 'approval' || !it.calls.length) return `<div class="call">${esc(it.call_line || '(no details: a run of an earlier build)')}</div>`;
  const lines = it.calls.map(c => `<div class="call">${esc(c.tool)}(${esc(c.args)}) <span class="meta">${esc(c.id)}</span></div>`).join('');
  return lines + (it.more ? `<div class="more meta">+${it.more} more not shown: this card decides only the calls above; the rest come next</div>` : '');
}
function card(it) {
  const d = document.createElement('div'); d.className = 'item'; d.dataset.run = it.run_id; d.dataset.wait = it.wait || '';
  d.dataset.sig = sigOf(it);
  const link = it.ui ? `<a href="${esc(it.ui)}" target="_blank">${esc(it.run_id)}</a>` : esc(it.run_id);
  const tool = it.calls.length ? it.calls[0].tool : '';
  let acts = '';
  if (!it.wait) acts = `<span class="meta">a run of an earlier build: decide it with <code>rein ${it.kind === 'question' ? 'answer' : it.kind === 'retry' ? 'retry' : 'approve'} ${esc(it.run_id)}</code></span>`;
  else if (it.kind === 'approval') acts = `<button class="approve">Approve</button><button class="deny">Deny</button>
    <button class="remember">Approve and remember</button><select class="scope"><option value="always">for ${esc(tool)} of ${esc(it.agent)}</option>
    <option value="${it.thread ? 'thread' : 'run'}">in this ${it.thread ? 'thread' : 'run'} only</option></select>`;
  else if (it.kind === 'question') acts = `<input class="answer-text" size="40" placeholder="your answer"><button class="answer approve">Answer</button>`;
  else acts = `<button class="retry approve">Retry</button>`;
  const notice = noticeOf(it);
  d.innerHTML = `<div class="top">${it.kind === 'approval' && it.wait ? '<input type="checkbox" class="pick">' : ''}
    <span class="kind ${it.kind}">${it.kind}</span><b>${esc(it.agent)}</b>${it.tenant ? '<span class="meta">tenant ' + esc(it.tenant) + '</span>' : ''}
    <span class="meta">${it.thread ? 'thread' : 'run'} ${link}</span></div>
    ${notice ? '<div class="notice" role="status">' + esc(notice) + '</div>' : ''}${calls(it)}
    ${it.said ? '<div class="said">“' + esc(it.said) + '”</div>' : ''}
    <div class="meta">waiting ${ago(it.since)}${it.until ? ' · times out ' + new Date(it.until).toLocaleString() : ''}</div>
    <div class="actions">${acts}<button class="show-turns">Conversation</button></div><div class="turns" hidden></div>`;
  const pick = d.querySelector('.pick');
  if (pick) { pick.checked = picked.get(it.run_id) === it.wait;
    pick.onchange = () => pick.checked ? picked.set(it.run_id, it.wait) : picked.delete(it.run_id); }
  const act = (action, extra = {}) => decide({...shown(it), action, reason: $('#reason').value, ...extra}, it);
  d.querySelector('.approve:not(.answer):not(.retry)')?.addEventListener('click', () => act('approve'));
  d.querySelector('.deny')?.addEventListener('click', () => act('deny'));
  d.querySelector('.remember')?.addEventListener('click', () => act('approve', {remember: d.querySelector('.scope').value, tool}));
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
// The list as shown: the server's, with the cards a refusal refreshed (while the list still has their stale wait).
function current(list) {
  const out = [];
  for (const it of list) {
    const f = fresh.get(it.run_id);
    if (f && f.stale === it.wait) { if (f.item) out.push(f.item); continue; }
    fresh.delete(it.run_id); out.push(it);
  }
  return out;
}
function render(list) {
  listed = list; items = current(list); const box = $('#items'); const waits = new Map(items.map(i => [i.run_id, i.wait]));
  for (const [id, wait] of [...picked]) if (waits.get(id) !== wait) picked.delete(id);
  for (const [id, n] of [...notices]) if (waits.get(id) !== n.wait) notices.delete(id);
  $('#count').textContent = items.length + ' waiting';
  if (!items.length) { box.innerHTML = '<div class="empty">nothing waits for you</div>'; return; }
  box.querySelector('.empty')?.remove();
  const have = new Map([...box.querySelectorAll('.item')].map(e => [e.dataset.run, e]));
  let prev = null;
  for (const it of items) {
    let el = have.get(it.run_id);
    if (!el || el.dataset.sig !== sigOf(it)) { const made = card(it); el ? el.replaceWith(made) : null; el = made; }
    have.delete(it.run_id);
    if (prev ? prev.nextSibling !== el : box.firstChild !== el) prev ? prev.after(el) : box.prepend(el);
    prev = el;
  }
  for (const el of have.values()) el.remove();
}
// A refusal: the card shows the run as it waits now (nothing was decided), with a one-line notice.
function refreshed(o, stale) {
  if (!('item' in o) || (o.item && o.item.wait === stale)) return;  // refused for another reason: the card stands
  fresh.set(o.run_id, {stale, item: o.item});
  if (o.item) notices.set(o.run_id, {wait: o.item.wait, text: 'Nothing was decided: the run moved on since this card was shown. It now waits on what is below.'});
  picked.delete(o.run_id);
}
// Each outcome in a line: what was applied as its card showed it (`tool(args) [id]`), or why not.
function report(outcomes, cards = []) {
  const seen = new Map(cards.map(it => [it.run_id, new Map(it.calls.map(c => [c.id, `${c.tool}(${c.args}) [${c.id}]`]))]));
  const calls = o => o.decided.map(id => seen.get(o.run_id)?.get(id) || (o.calls || [])[o.decided.indexOf(id)] || id);
  const line = o => o.outcome === 'applied' ? `applied ${o.run_id} ${calls(o).join(', ')}` : `${o.outcome} ${o.run_id}: ${o.detail}`;
  say(outcomes.map(line).join('\n'), outcomes.every(o => o.outcome === 'applied'));
}
async function decide(body, it) {
  try { const r = await api('/inbox/api/decide', {method: 'POST', body: JSON.stringify(body)});
    refreshed(r, body.wait); render(listed);
    report([r, ...(r.also || [])], [it]); if (r.rule) { say(`applied ${r.run_id}; rule ${r.rule.id} added`, true); loadRules(); }
  } catch (e) { say(e.message, false); }
}
async function bulk(action) {
  const cards = items.filter(it => picked.get(it.run_id) === it.wait && it.wait);
  if (!cards.length) return say('select some approvals first', false);
  try { const outcomes = await api('/inbox/api/bulk', {method: 'POST', body: JSON.stringify({items: cards.map(shown), action, reason: $('#reason').value})});
    const stale = new Map(cards.map(c => [c.run_id, c.wait]));
    for (const o of outcomes) { picked.delete(o.run_id); refreshed(o, stale.get(o.run_id)); }
    render(listed); report(outcomes, cards);
  } catch (e) { say(e.message, false); }
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
$('#select-all').onchange = e => { for (const it of items) if (it.kind === 'approval' && it.wait) e.target.checked ? picked.set(it.run_id, it.wait) : picked.delete(it.run_id);
  for (const p of document.querySelectorAll('.pick')) p.checked = e.target.checked; };
$('#bulk-approve').onclick = () => bulk('approve'); $('#bulk-deny').onclick = () => bulk('deny');
$('#rule-form').onsubmit = async e => { e.preventDefault();
  try { const r = await api('/inbox/api/rules', {method: 'POST', body: JSON.stringify({effect: $('#rule-effect').value, tool: $('#rule-tool').value,
      agent: $('#rule-agent').value, args: $('#rule-args').value})});
    say(`rule ${r.rule.id} added` + (r.decided.length ? `; it decided ${r.decided.length} pending call(s)` : ''), true); loadRules();
  } catch (e) { say(e.message, false); } };
start();
