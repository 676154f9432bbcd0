"""Telling people a run waits: a JSON POST a Slack or Teams incoming webhook accepts (`text`, plus fields for
other receivers), to the URL the worker's settings (rein.settings) name for the run's tenant or agent. The URL and
the secret live only in the worker's settings, never in a run's history.

    REIN_WAITING_WEBHOOK="https://hooks.example/default tenant:acme=https://hooks.example/acme agent:billing=https://..."
    REIN_WAITING_WEBHOOK_SECRET="s3cret tenant:acme=another"      (the same form)
    REIN_WAITING_WEBHOOK_RETRY_S=5     the first retry's delay (doubling, at most 5 minutes)
    REIN_INBOX_URL=https://rein.example/inbox     where the message links to (rein serve's page)

Signed two ways: `Rein-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (Stripe's form: the time
is signed, so a receiver refuses an old or replayed post), and, for one release beside it, the earlier
`X-Rein-Signature: sha256=<hex HMAC-SHA256 of the body>`. What the model wrote (its words, the calls' arguments, a
question) is escaped in `text` for the receivers' markup (Slack mrkdwn's `&`, `<`, `>`: no mention, channel ping or
link can be written into it), and the message asks Slack for no link previews.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import quote

from temporalio.exceptions import ApplicationError

from rein import settings
from rein.core.contract import WaitingNotice
from rein.core.inbox import WaitingMemo

SIGNATURE_HEADER = "X-Rein-Signature"
"""The earlier signature (the body only): sent for one more release beside TIMED_SIGNATURE_HEADER."""
TIMED_SIGNATURE_HEADER = "Rein-Signature"
DELIVERY_HEADER = "X-Rein-Delivery"


def pick(table: dict[str, str], agent: str, tenant: str | None) -> str:
    """The tenant's entry, else the agent's, else the default ("" when none)."""
    return table.get(f"tenant:{tenant}") or table.get(f"agent:{agent}") or table.get("", "")


def retry_s() -> float:
    """The first retry's delay when a webhook is configured, else 0 (runs then schedule no notice)."""
    now = settings.current()
    return now.waiting_webhook_retry_s if now.waiting_webhook else 0.0


def escaped(text: str) -> str:
    """`text` as plain text in Slack's mrkdwn (and HTML-like markup): `&`, `<`, `>` escaped, so no `<!channel>`,
    `<@U123>` or `<https://...|link>` can be formed from it."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message(notice: WaitingNotice, inbox_url: str = "") -> dict[str, object]:
    waiting = WaitingMemo.model_validate(notice.waiting)
    what = "thread" if waiting.thread else "run"
    who = f"{notice.agent}" + (f" (tenant {notice.tenant})" if notice.tenant else "")
    if waiting.kind == "approval":
        calls = "; ".join(f"{c.tool}({c.args})" for c in waiting.calls) or "tool calls"
        need = f"wants to run {calls}"
    elif waiting.kind == "question":
        need = f"asks: {waiting.question}"
    else:
        need = f"waits for a retry after an error: {waiting.question}"
    link = f"{inbox_url.rstrip('/')}#run={quote(notice.run_id, safe='')}" if inbox_url else ""
    text = escaped(f"{what} {notice.run_id} of {who} {need}") + (f" · {link}" if link else "")
    return {"text": text, "run_id": notice.run_id, "thread": waiting.thread, "agent": notice.agent, "tenant": notice.tenant,
            "kind": waiting.kind, "calls": [c.model_dump() for c in waiting.calls], "said": waiting.said,
            "since": waiting.since, "until": waiting.until, "link": link, "wait": waiting.wait,
            "unfurl_links": False, "unfurl_media": False}


def signature(secret: str, body: bytes) -> str:
    """The earlier signature, of the body alone (X-Rein-Signature): a captured post verifies forever."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def timed_signature(secret: str, body: bytes, at: int) -> str:
    """`t=<at>,v1=<hex HMAC-SHA256 of "<at>.<body>">` (Rein-Signature): the receiver checks the time it signs."""
    signed = str(at).encode() + b"." + body
    return f"t={at},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


async def deliver(notice: WaitingNotice) -> str:
    """POST the message; a receiver that is down or answers 5xx, 408 or 429 raises (Temporal retries); another
    4xx is final (a wrong URL or secret does not get better by retrying)."""
    import aiohttp

    now = settings.current()
    url = pick(now.waiting_webhook, notice.agent, notice.tenant)
    if not url:
        return "no webhook for this agent or tenant"
    body = json.dumps(message(notice, now.inbox_url), ensure_ascii=False).encode()
    headers = {"Content-Type": "application/json", DELIVERY_HEADER: f"{notice.run_id}@{notice.waiting.get('since', '')}"}
    secret = pick(now.waiting_webhook_secret, notice.agent, notice.tenant)
    if secret:
        headers[TIMED_SIGNATURE_HEADER] = timed_signature(secret, body, int(time.time()))
        headers[SIGNATURE_HEADER] = signature(secret, body)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            async with session.post(url, data=body, headers=headers) as response:
                status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ApplicationError(f"the webhook could not be reached: {type(exc).__name__}: {exc}"[:300]) from None
    if status < 300:
        return f"delivered ({status})"
    final = 400 <= status < 500 and status not in (408, 429)
    raise ApplicationError(f"the webhook answered {status}", non_retryable=final, type="WebhookRefused")
