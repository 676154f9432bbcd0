// Drives rein's AG-UI endpoint with the real @ag-ui/client HttpAgent (installed in examples/agui by .ci/run),
// step by step, and prints one JSON line per step for tests/test_agui.py to check.
//   node tests/agui_driver.mjs URL THREAD_ID STEPS_JSON
// Steps: {"do": "send", "text", "id"?, "mode"?}, {"do": "approve", "approve": bool, "reason"?}, {"do": "tool",
// "content", "call"?}, {"do": "repost"} (the last run's exact input again, as a client retrying a POST), {"do": "run"};
// any step may say "cut": an event type after whose first event the connection drops (the driver then reconnects
// with Last-Event-ID, as examples/agui/app.js does).
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const here = new URL(".", import.meta.url).pathname;
const client = resolve(here, "../examples/agui/node_modules/@ag-ui/client/dist/index.mjs");
const { HttpAgent } = await import(pathToFileURL(client).href);
const [url, threadId, stepsJson] = process.argv.slice(2);
const steps = JSON.parse(stepsJson);
const headers = process.env.AGUI_TOKEN ? { Authorization: `Bearer ${process.env.AGUI_TOKEN}` } : {};
const tools = [{ name: "pick_number", description: "Ask the person for a number.",
                 parameters: { type: "object", properties: { question: { type: "string" } } } }];

let cutAfter = null;
function cuttingFetch(target, init) {
  return fetch(target, init).then((response) => {
    if (!cutAfter || !response.body) return response;
    const marker = `"type":"${cutAfter}"`;
    cutAfter = null;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        const text = decoder.decode(value, { stream: true });
        const at = (seen + text).indexOf(marker);
        if (at < 0) { seen += text; return controller.enqueue(value); }
        const end = (seen + text).indexOf("\n\n", at);
        controller.enqueue(new TextEncoder().encode((seen + text).slice(seen.length, end + 2)));
        await reader.cancel();
        controller.error(new TypeError("connection lost (cut by the test)"));
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  });
}

// A dropped body makes HttpAgent's teardown rethrow from reader.cancel(): in Node an unhandled rejection ends the
// process (a browser only logs it). The run itself fails as it should; the driver reconnects.
process.on("unhandledRejection", () => {});

const agent = new HttpAgent({ url, threadId, headers, fetch: cuttingFetch });
let lastInput = null;
let events = [];
let lastEventId = null;
// The id to resume from is the last event HttpAgent has APPLIED (its messages hold its effect): an event's id
// counts once its messages changed, or once the next event comes (events are applied in order).
let pendingId = null;
// How many of `events` were applied when lastEventId was: a reconnect resumes after lastEventId, so the server
// sends the later ones again, and the report keeps what the client applied, then what the resumed stream brings.
let applied = 0;
const subscriber = {
  onRunInitialized({ input }) { lastInput = input; },
  onEvent({ event }) {
    if (pendingId) { lastEventId = pendingId; applied = events.length; }
    events.push(event);
    pendingId = event.metadata?.rein?.eventId ?? null;
  },
  onMessagesChanged() { if (pendingId) { lastEventId = pendingId; applied = events.length; } },
};

async function runOnce(parameters) {
  events = [];
  lastEventId = pendingId = null;
  applied = 0;
  const report = { errors: [] };
  let resumeFrom = null;
  for (let attempt = 0; attempt < 4; attempt++) {
    agent.headers = resumeFrom ? { ...headers, "Last-Event-ID": resumeFrom } : { ...headers };
    try {
      // the same parameters on a reconnect (the endpoint ignores them then; HttpAgent wants its interrupts covered)
      await agent.runAgent({ tools, ...parameters }, subscriber);
      break;
    } catch (error) {
      report.errors.push(String(error.message || error));
      if (!lastEventId) break;
      resumeFrom = lastEventId;
      events = events.slice(0, applied);  // an event received but not applied comes again after resumeFrom
      report.reconnectedFrom = resumeFrom;
    }
  }
  agent.headers = { ...headers };
  return report;
}

function summary(report) {
  const finished = events.filter((e) => e.type === "RUN_FINISHED").at(-1);
  const error = events.find((e) => e.type === "RUN_ERROR");
  return {
    ...report,
    types: events.map((e) => e.type),
    text: events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join(""),
    outcome: finished?.outcome?.type ?? (finished ? "success" : null),
    interrupts: (finished?.outcome?.interrupts ?? []).map((i) => ({ id: i.id, reason: i.reason })),
    pending: finished?.outcome?.pendingToolCallIds ?? [],
    error: error ? { message: error.message, code: error.code } : null,
    messages: agent.messages.map((m) => ({ role: m.role, content: m.content ?? null,
                                           calls: (m.toolCalls ?? []).map((c) => c.function.name) })),
  };
}

async function repost() {
  events = [];
  const response = await fetch(url, { method: "POST", headers: { ...headers, "Content-Type": "application/json" },
                                      body: JSON.stringify(lastInput) });
  const text = await response.text();
  events = text.split("\n\n").filter((b) => b.includes("data:"))
    .map((b) => JSON.parse(b.split("\n").find((l) => l.startsWith("data:")).slice(5)));
  return { status: response.status };
}

for (const [index, step] of steps.entries()) {
  let report;
  cutAfter = step.cut ?? null;
  if (step.do === "send") {
    agent.addMessage({ id: step.id ?? `m-${index}-${Date.now()}`, role: "user", content: step.text });
    report = await runOnce({ forwardedProps: step.mode ? { mode: step.mode } : {} });
  } else if (step.do === "approve") {
    const resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved",
      payload: step.approve ? { approve: true } : { approve: false, reason: step.reason ?? "no" } }));
    report = await runOnce({ resume });
  } else if (step.do === "tool") {
    const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    const call = agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => !answered.has(c.id));
    agent.addMessage({ id: `t-${index}-${Date.now()}`, role: "tool", toolCallId: step.call ?? call.id, content: step.content });
    report = await runOnce({});
  } else if (step.do === "repost") {
    report = await repost();
  } else {
    report = await runOnce({});
  }
  console.log(JSON.stringify({ step: index, do: step.do, ...summary(report) }));
}
