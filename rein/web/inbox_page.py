"""The inbox page (`rein serve`, /inbox): plain HTML, its script and style in files of their own beside this module
(rein/web/static/: inbox.js, inbox.css, package data), served as they are (no build step, no inline script: the
page's Content-Security-Policy allows none, rein.web.guard).

The script signs in from the link's fragment (`#token=...`, kept in the tab's sessionStorage) or a pasted token,
sends it as a bearer header, follows /inbox/api/events (server-sent events, read with fetch so the token travels
in a header), and acts through the JSON API of rein.web.inbox.
"""

STATIC = "static"
"""The folder of the page's script and style, in the rein.web package."""

OPEN_BANNER = '<div id="open" role="alert" hidden></div>'
"""Where the page says it is open (rein.web.inbox fills it in open mode)."""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rein inbox</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/inbox/static/inbox.css"><link rel="icon" href="data:,"></head>
<body>
<div id="open" role="alert" hidden></div>
<header><b>rein inbox</b><span id="who"></span><span id="count"></span></header>
<main>
<div id="list">
 <section id="signin"><b>Sign in</b>: open the link `rein serve` printed (`rein inbox link` shows it again), or paste a token: the codec server's shared token or your identity provider's JWT.
  <form id="signin-form"><input id="token" type="password" size="50" autocomplete="off"> <button>Sign in</button></form></section>
 <div id="status"></div>
 <section id="bulk"><label><input type="checkbox" id="select-all"> all</label>
  <input id="reason" placeholder="reason (recorded; the model sees a denial's)" size="40">
  <button id="bulk-approve" class="approve">Approve selected</button> <button id="bulk-deny" class="deny">Deny selected</button></section>
 <div id="items"><div class="empty">loading…</div></div>
</div>
<aside>
 <section><b>Rules</b> <span class="meta">most specific wins; deny beats allow</span><ul id="rules"></ul>
  <form id="rule-form"><select id="rule-effect"><option>allow</option><option>ask</option><option>deny</option></select>
   <input id="rule-tool" placeholder="tool or *" size="12"> <input id="rule-agent" placeholder="agent (any)" size="12"><br>
   <input id="rule-args" placeholder="path=/tmp/* (arguments)" size="30"> <button id="rule-add">Add rule</button></form></section>
</aside>
</main>
<script src="/inbox/static/inbox.js"></script>
</body></html>
"""


def page(open_notice: str | None) -> str:
    """The page; in open mode with `open_notice` shown at its top, before any script runs."""
    if not open_notice:
        return PAGE
    from html import escape

    return PAGE.replace(OPEN_BANNER, f'<div id="open" role="alert">{escape(open_notice)}</div>')
