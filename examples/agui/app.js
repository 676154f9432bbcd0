// A page that chats with rein's calculator agent through @ag-ui/client's HttpAgent (docs/web.md).
// The conversation is a rein thread (its id is in the page's address: reload, or open it in another browser,
// and it is the same conversation). Approvals are asked in the page, the agent's `pick_number` tool runs here,
// and a dropped connection is resumed from the last event the page has (Last-Event-ID).
import { HttpAgent } from "@ag-ui/client";

const params = new URLSearchParams(location.search);
const threadId = params.get("thread") || `calc-${crypto.randomUUID().slice(0, 8)}`;
// Sign-in: the link serve.py prints carries the token in its fragment (never sent to a server); the page keeps it
// in this tab's sessionStorage, takes it out of the address bar, and sends it as a bearer header.
const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) sessionStorage.setItem("rein-token", given);
history.replaceState(null, "", `${location.pathname}?${new URLSearchParams({ ...Object.fromEntries(params), thread: threadId })}`);
const token = sessionStorage.getItem("rein-token");
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const agent = new HttpAgent({ url: params.get("endpoint") || "/agui/calculator", threadId, headers });

// A tool the page runs itself: the model asks it for a number, the person types one.
const tools = [{
  name: "pick_number",
  description: "Ask the person using the page for a number.",
  parameters: { type: "object", properties: { question: { type: "string" } } },
}];

const $ = (id) => document.getElementById(id);
let lastEventId = null;

// Where to resume from: the id (rein's, in the event's metadata) of the last event HttpAgent has applied; an
// event counts once the messages changed with it, or once the next event comes (they are applied in order).
let pendingId = null;
const subscriber = {
  onEvent({ event }) {
    if (pendingId) lastEventId = pendingId;
    pendingId = event.metadata?.rein?.eventId ?? null;
  },
  onMessagesChanged() {
    if (pendingId) lastEventId = pendingId;
    render();
  },
  onRunErrorEvent({ event }) { note(`error: ${event.message}`, "error"); },
};

function render() {
  const log = $("log");
  log.replaceChildren();
  const results = new Map(agent.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.content]));
  for (const message of agent.messages) {
    if (message.role === "tool") continue;
    if (message.content) line(message.role, message.content);
    for (const call of message.toolCalls ?? []) {
      const result = results.has(call.id) ? ` → ${results.get(call.id)}` : "";
      line("tool", `${call.function.name}(${call.function.arguments})${result}`);
    }
  }
  log.scrollTop = log.scrollHeight;
}

function line(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  div.textContent = text;
  $("log").append(div);
}

function note(text, kind = "note") {
  $("status").textContent = text;
  $("status").className = kind;
}

// One AG-UI run; a dropped connection is taken up again from the last event (a few times), and what the run
// ended with decides what the page asks next: an approval, a number for pick_number, or nothing.
async function run(parameters = {}) {
  note("working…");
  lastEventId = pendingId = null;
  let resumeFrom = null;
  try {
    for (let attempt = 0; ; attempt++) {
      agent.headers = resumeFrom ? { ...headers, "Last-Event-ID": resumeFrom } : { ...headers };
      try {
        await agent.runAgent({ tools, ...parameters }, subscriber); // a reconnect's are ignored by the endpoint
        return after();
      } catch (error) {
        if (!lastEventId || attempt >= 5 || agent.pendingInterrupts.length) throw error;
        resumeFrom = lastEventId;
        note("reconnecting…");
        await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
      }
    }
  } catch (error) {
    note(`error: ${error.message}`, "error");
  } finally {
    agent.headers = { ...headers };
  }
}

function after() {
  render();
  if (agent.pendingInterrupts.length) return askApproval(agent.pendingInterrupts);
  const pending = pendingToolCalls();
  if (pending.length) return askNumber(pending[0]);
  note("ready");
}

function pendingToolCalls() {
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return agent.messages.flatMap((m) => m.toolCalls ?? []).filter((c) => !answered.has(c.id) && c.function.name === "pick_number");
}

function askApproval(interrupts) {
  const box = $("ask");
  box.replaceChildren();
  for (const interrupt of interrupts) {
    const row = document.createElement("div");
    row.className = "approval";
    row.append(interrupt.message || interrupt.reason);
    for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
      const button = document.createElement("button");
      button.textContent = label;
      button.onclick = () => decide(interrupts, interrupt.id, approve);
      row.append(button);
    }
    box.append(row);
  }
  note("waiting for your approval");
}

const decisions = new Map();

function decide(interrupts, id, approve) {
  decisions.set(id, approve);
  if (interrupts.some((i) => !decisions.has(i.id))) return;
  const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approve: decisions.get(i.id) } }));
  decisions.clear();
  $("ask").replaceChildren();
  return run({ resume });
}

function askNumber(call) {
  const box = $("ask");
  const input = document.createElement("input");
  input.id = "number";
  input.placeholder = JSON.parse(call.function.arguments || "{}").question || "a number";
  const button = document.createElement("button");
  button.textContent = "Send number";
  button.onclick = () => {
    agent.addMessage({ id: crypto.randomUUID(), role: "tool", toolCallId: call.id, content: input.value });
    box.replaceChildren();
    return run();
  };
  box.replaceChildren("The agent asks for a number: ", input, button);
  note("waiting for your number");
}

// A message sent while a run is under way goes once that run ends (HttpAgent runs one at a time; the thread
// itself would take it at any moment: forwardedProps.mode, docs/threads.md).
let queue = Promise.resolve();
$("send").onclick = () => {
  const text = $("text").value.trim();
  if (!text) return;
  $("text").value = "";
  queue = queue.then(() => {
    agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    render();
    return run();
  });
};
$("text").addEventListener("keydown", (e) => { if (e.key === "Enter") $("send").onclick(); });
$("thread").textContent = threadId;
note("ready");
if (params.get("thread")) {  // an existing thread: its conversation so far, and the turn under way if there is one
  queue = queue.then(() => agent.runAgent({ tools }, subscriber).then(after, () => note("ready")));
}
