// Drives rein's AI SDK endpoint with the `ai` package's own chat client (AbstractChat + DefaultChatTransport, what
// useChat runs; installed in examples/aisdk by .ci/run), step by step, printing one JSON line per step for
// tests/test_ai_sdk.py to check.
//   node tests/ai_sdk_driver.mjs API CHAT_ID STEPS_JSON        (API: http://host:port/ai-sdk/AGENT)
// Steps: {"do": "send", "text", "id"?}, {"do": "approve", "approved": bool, "reason"?} (every open approval),
// {"do": "output", "output", "call"?} (the page's tool), {"do": "load"} (GET messages into the chat, checked with the
// SDK's validateUIMessages), {"do": "resume"}, {"do": "regenerate"}; any step may say "cut": a chunk type after whose
// first chunk the connection drops (the step then resumes, as useChat's `resume` does on a reload), and "release": a
// hold file (tests/agents/ai_sdk.py) the driver deletes once the resumed stream has replayed the answer's start.
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { unlinkSync } from "node:fs";

const here = new URL(".", import.meta.url).pathname;
const ai = await import(pathToFileURL(resolve(here, "../examples/aisdk/node_modules/ai/dist/index.js")).href);
const { AbstractChat, DefaultChatTransport, validateUIMessages } = ai;
const [api, chatId, stepsJson] = process.argv.slice(2);
const steps = JSON.parse(stepsJson);
const headers = process.env.AI_SDK_TOKEN ? { Authorization: `Bearer ${process.env.AI_SDK_TOKEN}` } : {};
const tools = [{ name: "pick_number", description: "Ask the person for a number.",
                 parameters: { type: "object", properties: { question: { type: "string" } } } }];

let chunks = [];
let cutAfter = null;
// Every response's chunks, as the transport reads them; with `cutAfter`, the connection drops after that chunk.
function watchingFetch(target, init) {
  return fetch(target, init).then((response) => {
    if (!response.body || response.status !== 200) return response;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    const cut = cutAfter;
    cutAfter = null;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          const data = event.split("\n").find((line) => line.startsWith("data: "));
          controller.enqueue(new TextEncoder().encode(event));
          if (!data || data === "data: [DONE]") continue;
          const chunk = JSON.parse(data.slice(6));
          chunks.push(chunk);
          if (cut && chunk.type === cut) {
            await reader.cancel();
            return controller.error(new TypeError("network connection lost (cut by the test)"));
          }
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  });
}

class State {
  constructor(messages = []) { this.messages = messages; this.status = "ready"; this.error = undefined; }
  pushMessage = (message) => { this.messages = this.messages.concat(message); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => { this.messages = this.messages.map((m, i) => (i === index ? message : m)); };
  snapshot = (value) => structuredClone(value);
}

class NodeChat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State(init.messages) }); }
}

const transport = new DefaultChatTransport({ api, headers, body: { tools }, fetch: watchingFetch });
let finish = null;
let data = [];
const chat = new NodeChat({ id: chatId, transport, messages: [],
                            onFinish: (event) => { finish = event; }, onData: (part) => data.push(part) });

function report(extra = {}) {
  const last = [...chat.messages].reverse().find((m) => m.role === "assistant");
  const parts = last ? last.parts : [];
  return {
    status: chat.status, error: chat.error ? String(chat.error.message) : null,
    types: chunks.map((c) => c.type), chunks,
    text: parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
    tools: parts.filter((p) => p.type.startsWith("tool-")).map((p) => ({
      name: p.type.slice(5), id: p.toolCallId, state: p.state, input: p.input, output: p.output,
      approval: p.approval ?? null })),
    messageId: last ? last.id : null, finishReason: finish ? finish.finishReason ?? null : null,
    ids: chat.messages.map((m) => `${m.role}:${m.id}`), data, ...extra,
  };
}

async function load() {
  const response = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`, { headers });
  const body = await response.json();
  if (!response.ok) return { status: response.status, body };
  chat.messages = await validateUIMessages({ messages: body });
  return { status: response.status, count: body.length };
}

for (const step of steps) {
  chunks = [];
  data = [];
  finish = null;
  cutAfter = step.cut ?? null;
  const extra = {};
  if (step.do === "send") {
    const message = { id: step.id ?? crypto.randomUUID(), role: "user", parts: [{ type: "text", text: step.text }] };
    await chat.sendMessage(message);
  } else if (step.do === "approve") {
    const last = chat.messages[chat.messages.length - 1];
    for (const part of last.parts) {
      if (part.state === "approval-requested") {
        await chat.addToolApprovalResponse({ id: step.approval ?? part.approval.id, approved: step.approved,
                                             reason: step.reason });
      }
    }
    await chat.sendMessage();
  } else if (step.do === "output") {
    const last = chat.messages[chat.messages.length - 1];
    const part = last.parts.find((p) => p.type === "tool-pick_number" && (step.call == null || p.toolCallId === step.call));
    await chat.addToolOutput({ tool: "pick_number", toolCallId: step.call ?? part.toolCallId, output: step.output });
    await chat.sendMessage();
  } else if (step.do === "load") {
    extra.load = await load();
  } else if (step.do === "resume") {
    await chat.resumeStream();
  } else if (step.do === "regenerate") {
    await chat.regenerate();
  }
  if (step.cut) {  // the connection dropped mid-answer: a reload resumes, replaying the active message whole
    extra.cutError = chat.error ? String(chat.error.message) : null;
    extra.cutText = report().text;
    chunks = [];
    const resuming = chat.resumeStream();
    if (step.release) {  // the answer is held until the resumed stream has replayed its start: then it may end
      const deadline = Date.now() + 60_000;
      while (!chunks.some((c) => c.type === "text-delta")) {
        if (Date.now() > deadline) throw new Error("the resumed stream replayed no text within 60 s");
        await new Promise((done) => setTimeout(done, 10));
      }
      extra.replayedWhileHeld = chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
      unlinkSync(step.release);
    }
    await resuming;
  }
  console.log(JSON.stringify(report(extra)));
}
